package main

import (
	"database/sql"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
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

	var stop atomic.Bool
	var writers sync.WaitGroup
	for w := range 8 {
		writers.Go(func() {
			for n := 0; !stop.Load(); n++ {
				postJSON(sick.BaseURL+"/users", fmt.Sprintf(`{"name":"sick %d %d"}`, w, n))
			}
		})
	}
	defer func() { stop.Store(true); proxy.restore(); writers.Wait() }()

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
	// The server ends the sick replica's open transactions itself (its sessions' idle timeout).
	for openTransactions(t, db) > 0 {
		if time.Since(faulted) > 10*time.Second {
			t.Fatalf("%d transactions of the black-holed replica still open %v after the fault", openTransactions(t, db), time.Since(faulted))
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("its open transactions ended %v after the fault", time.Since(faulted).Round(time.Millisecond))
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
