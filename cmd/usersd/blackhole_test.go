package main

import (
	"database/sql"
	"fmt"
	"net/http"
	"syscall"
	"testing"
	"time"

	"usersd/store/storetest"
)

// TestABlackHoledReplicaDoesNotHoldTheOthersWrites runs two replicas on one PostgreSQL, the first
// through a proxy, and black-holes the first's connections while it writes, until a transaction of
// it is caught open on the server. The second replica's creates must succeed within 10 s, and the
// server must end the open transaction within seconds. Before the change log's row was written at
// commit, such a transaction held the lock that orders the log, and with PostgreSQL's defaults
// held every other replica's writes for as long as TCP took to give up on the silent peer: two
// hours and more.
func TestABlackHoledReplicaDoesNotHoldTheOthersWrites(t *testing.T) {
	dsn := storetest.PostgresSchema(t)
	proxy := startFaultProxy(t, dsn)
	_, sick, _ := startProcess(t, proxy.dsn, "-request-timeout", "2s")
	_, well, _ := startProcess(t, dsn)
	db := storetest.OpenPostgres(t, dsn)

	stopWriters := writeUntilStopped(sick.BaseURL, "sick", 8)
	defer func() { proxy.restore(); stopWriters() }()

	// Black-hole until the sick replica is caught inside a transaction: that is the fault that
	// matters.
	var faulted time.Time
	for attempt := 0; ; attempt++ {
		if attempt == 20 {
			t.Fatal("20 black-holes never caught the sick replica inside a transaction")
		}
		time.Sleep(300 * time.Millisecond)
		proxy.blackhole()
		faulted = time.Now()
		time.Sleep(100 * time.Millisecond)
		if openTransactions(t, db) > 0 {
			break
		}
		proxy.restore()
	}

	deadline := faulted.Add(10 * time.Second)
	for n := 0; ; n++ {
		status, err := postJSON(well.BaseURL+"/users", fmt.Sprintf(`{"name":"well %d"}`, n))
		if err == nil && status == http.StatusCreated {
			t.Logf("the well replica created a user %v after the fault", time.Since(faulted).Round(time.Millisecond))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the well replica's creates still fail %v after the other replica was black-holed: %d %v",
				time.Since(faulted).Round(time.Millisecond), status, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Health tells a load balancer which replica to leave out: the sick one's turns 503 within its
	// ping's 2 s, the well one's stays 200.
	for healthStatus(sick.BaseURL) != http.StatusServiceUnavailable {
		if time.Since(faulted) > 10*time.Second {
			t.Fatalf("the black-holed replica's /health is not 503 %v after the fault", time.Since(faulted))
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("the black-holed replica's /health was 503 %v after the fault", time.Since(faulted).Round(time.Millisecond))
	if status := healthStatus(well.BaseURL); status != http.StatusOK {
		t.Fatalf("the well replica's /health: %d", status)
	}
	// The server ends the sick replica's open transactions itself (its sessions' idle timeout).
	for openTransactions(t, db) > 0 {
		if time.Since(faulted) > 10*time.Second {
			t.Fatalf("%d transactions of the black-holed replica still open %v after the fault", openTransactions(t, db), time.Since(faulted))
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("its open transactions ended %v after the fault", time.Since(faulted).Round(time.Millisecond))

	// Once the network heals, so do the sick replica's health and its reads and writes: the
	// connections that the black hole broke are replaced, not waited on for minutes.
	proxy.restore()
	healed := time.Now()
	for healthStatus(sick.BaseURL) != http.StatusOK {
		if time.Since(healed) > 10*time.Second {
			t.Fatalf("the replica's /health is not 200 %v after its network healed", time.Since(healed))
		}
		time.Sleep(100 * time.Millisecond)
	}
	stopWriters()
	for n := 0; ; n++ {
		read := getStatus(sick.BaseURL + "/users?limit=1")
		created, _ := postJSON(sick.BaseURL+"/users", fmt.Sprintf(`{"name":"healed %d"}`, n))
		if read == http.StatusOK && created == http.StatusCreated {
			break
		}
		if time.Since(healed) > 20*time.Second {
			t.Fatalf("the replica still answers a list %d and a create %d %v after its network healed", read, created, time.Since(healed))
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("its reads and writes worked again %v after the network healed", time.Since(healed).Round(time.Millisecond))
}

// openTransactions counts the sessions of the test's database that are idle inside a transaction:
// writers whose client stopped answering between two statements.
func openTransactions(t *testing.T, db *sql.DB) int {
	t.Helper()
	var n int
	err := db.QueryRow(`SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND state = 'idle in transaction'`).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// healthStatus is the status of base's /health, or 0 if it gave none within 5 s.
func healthStatus(base string) int { return getStatus(base + "/health") }

// getStatus is the status of a GET of url, or 0 if it gave none within 5 s.
func getStatus(url string) int {
	client := &http.Client{Timeout: 5 * time.Second}
	res, err := client.Get(url)
	if err != nil {
		return 0
	}
	res.Body.Close()
	return res.StatusCode
}

// TestAFrozenReplicaDoesNotHoldTheOthersWrites stops a replica's process (SIGSTOP) for 8 s while
// it writes, as a long pause of the runtime or the host would, and creates on another replica
// meanwhile: every create must succeed, none waiting on the frozen one. Before the change log's
// lock was taken at commit, a replica frozen inside a write held every other replica's writes
// for as long as it stayed frozen.
func TestAFrozenReplicaDoesNotHoldTheOthersWrites(t *testing.T) {
	dsn := storetest.PostgresSchema(t)
	frozenCmd, frozen, _ := startProcess(t, dsn)
	_, well, _ := startProcess(t, dsn)
	stopWriters := writeUntilStopped(frozen.BaseURL, "frozen", 8)
	time.Sleep(500 * time.Millisecond)
	if err := frozenCmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	thawed := false
	thaw := func() {
		if !thawed {
			thawed = true
			frozenCmd.Process.Signal(syscall.SIGCONT)
		}
	}
	defer func() { thaw(); stopWriters() }()

	frozenAt := time.Now()
	var slowest time.Duration
	for n := 0; time.Since(frozenAt) < 8*time.Second; n++ {
		start := time.Now()
		status, err := postJSON(well.BaseURL+"/users", fmt.Sprintf(`{"name":"well %d"}`, n))
		slowest = max(slowest, time.Since(start))
		if err != nil || status != http.StatusCreated {
			t.Fatalf("a create on the well replica %v after the other froze: %d %v", time.Since(frozenAt).Round(time.Millisecond), status, err)
		}
	}
	thaw()
	// Well under the 5 s that a transaction idle on the server may last before the server ends it.
	if slowest > 2*time.Second {
		t.Fatalf("the slowest create on the well replica while the other was frozen took %v", slowest)
	}
	t.Logf("the slowest create on the well replica while the other was frozen took %v", slowest.Round(time.Millisecond))
}
