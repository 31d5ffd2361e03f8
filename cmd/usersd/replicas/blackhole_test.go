package replicas_test

import (
	"database/sql"
	"fmt"
	"net/http"
	"syscall"
	"testing"
	"time"

	"usersd/internal/apitest"
	"usersd/internal/proctest"
	"usersd/store/storetest"
)

// TestABlackHoledReplicaDoesNotHoldTheOthersWrites runs two replicas on one PostgreSQL, the first
// through a proxy, and black-holes the first's connections while it writes, until a transaction of
// it is caught open on the server. The second replica's creates must succeed, and the server must
// end the open transaction (its idle timeout is 5 s). Before the change log's row was written at
// commit, such a transaction held the lock that orders the log, and with PostgreSQL's defaults
// held every other replica's writes for as long as TCP took to give up on the silent peer: two
// hours and more. The waits below are bounded by faultBound, far from those hours and far above
// what a machine busy compiling something else adds to the seconds they take.
func TestABlackHoledReplicaDoesNotHoldTheOthersWrites(t *testing.T) {
	t.Parallel() // mostly waits on faults and timeouts: see startProcess
	dsn := storetest.PostgresSchema(t)
	proxy := proctest.StartFaultProxy(t, dsn)
	_, sick, _ := startProcess(t, proxy.DSN, "-request-timeout", "2s")
	_, well, _ := startProcess(t, dsn)
	db := storetest.OpenPostgres(t, dsn)

	stopWriters := writeUntilStopped(sick.BaseURL, "sick", 8)
	defer func() { proxy.Restore(); stopWriters() }()

	// Black-hole until the sick replica is caught inside a transaction: that is the fault that
	// matters.
	var faulted time.Time
	for attempt := 0; ; attempt++ {
		if attempt == 20 {
			t.Fatal("20 black-holes never caught the sick replica inside a transaction")
		}
		time.Sleep(300 * time.Millisecond)
		proxy.Blackhole()
		faulted = time.Now()
		time.Sleep(100 * time.Millisecond)
		if openTransactions(t, db) > 0 {
			break
		}
		proxy.Restore()
	}

	deadline := faulted.Add(faultBound)
	for n := 0; ; n++ {
		status, _, err := apitest.PostJSON(well.BaseURL+"/users", fmt.Sprintf(`{"name":"well %d"}`, n))
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
		if time.Since(faulted) > faultBound {
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
		if time.Since(faulted) > faultBound {
			t.Fatalf("%d transactions of the black-holed replica still open %v after the fault", openTransactions(t, db), time.Since(faulted))
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("its open transactions ended %v after the fault", time.Since(faulted).Round(time.Millisecond))

	// Once the network heals, so do the sick replica's health and its reads and writes: the
	// connections that the black hole broke are replaced, not waited on for minutes.
	proxy.Restore()
	healed := time.Now()
	for healthStatus(sick.BaseURL) != http.StatusOK {
		if time.Since(healed) > faultBound {
			t.Fatalf("the replica's /health is not 200 %v after its network healed", time.Since(healed))
		}
		time.Sleep(100 * time.Millisecond)
	}
	stopWriters()
	for n := 0; ; n++ {
		read := getStatus(sick.BaseURL + "/users?limit=1")
		created, _, _ := apitest.PostJSON(sick.BaseURL+"/users", fmt.Sprintf(`{"name":"healed %d"}`, n))
		if read == http.StatusOK && created == http.StatusCreated {
			break
		}
		if time.Since(healed) > faultBound {
			t.Fatalf("the replica still answers a list %d and a create %d %v after its network healed", read, created, time.Since(healed))
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("its reads and writes worked again %v after the network healed", time.Since(healed).Round(time.Millisecond))
}

// faultBound is how long TestABlackHoledReplicaDoesNotHoldTheOthersWrites waits for each thing
// that must follow the fault, or the healing, in seconds (the ping's 2 s, the server's 5 s idle
// timeout, a new connection): a hang detector, not a measure of speed.
const faultBound = 30 * time.Second

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
// for as long as it stayed frozen: until the server ended its transaction, idle for 5 s.
//
// That no create waits on the frozen replica is read from the server, not from a clock: the
// sessions of both replicas are known by their application_name, and throughout the freeze none of
// the well replica's may wait for a lock that the frozen replica holds, directly or behind other
// waiters (pg_blocking_pids). Waits behind anyone else are only counted: the lock that orders the
// change log is an advisory lock, one for the whole database, which the other tests' replicas in
// their own schemas take too. (The slowest create was once held under 2 s instead, which a machine
// busy compiling something else could break without any wait on a lock.)
func TestAFrozenReplicaDoesNotHoldTheOthersWrites(t *testing.T) {
	t.Parallel() // mostly waits on faults and timeouts: see startProcess
	dsn := storetest.PostgresSchema(t)
	const wellName, frozenName = "usersd-well-replica", "usersd-frozen-replica" // no spaces: the URL would carry them as +
	frozenCmd, frozen, _ := startProcess(t, storetest.WithURLParam(t, dsn, "application_name", frozenName))
	_, well, _ := startProcess(t, storetest.WithURLParam(t, dsn, "application_name", wellName))
	db := storetest.OpenPostgres(t, dsn)
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

	// The well replica's sessions that wait for a lock, sampled until the freeze ends, from a
	// second after it began: a statement or a COMMIT that the frozen process sent just before it
	// stopped still runs to its end on the server, and the well replica may wait on it meanwhile
	// (once seen: a wait on the advisory lock of the change log during the frozen one's commit).
	// What the test guards against is a lock held for as long as the freeze lasts.
	sampling := make(chan struct{})
	sampled := make(chan lockWaits, 1)
	go func() {
		select {
		case <-time.After(time.Second):
		case <-sampling:
		}
		sampled <- sampleLockWaits(db, wellName, frozenName, sampling)
	}()

	frozenAt := time.Now()
	var creates int
	var slowest time.Duration
	for ; time.Since(frozenAt) < 8*time.Second; creates++ {
		start := time.Now()
		status, _, err := apitest.PostJSON(well.BaseURL+"/users", fmt.Sprintf(`{"name":"well %d"}`, creates))
		slowest = max(slowest, time.Since(start))
		if err != nil || status != http.StatusCreated {
			close(sampling)
			t.Fatalf("a create on the well replica %v after the other froze: %d %v (%s)", time.Since(frozenAt).Round(time.Millisecond), status, err, <-sampled)
		}
	}
	close(sampling)
	waits := <-sampled
	thaw()
	t.Logf("%d creates on the well replica while the other was frozen, the slowest %v; %s",
		creates, slowest.Round(time.Millisecond), waits)
	if waits.err != nil {
		t.Fatal(waits.err)
	}
	if waits.onHolder > 0 {
		t.Fatalf("the well replica's writes waited on the frozen one's locks: %s", waits)
	}
	if waits.samples < 10 {
		t.Fatalf("the well replica's sessions were sampled only %d times during the freeze: too few to tell", waits.samples)
	}
}

// lockWaits is what sampleLockWaits found.
type lockWaits struct {
	samples  int    // how many times the sessions were read
	waiting  int    // in how many of those a session waited for a lock, on anyone
	onHolder int    // in how many it waited on the holder's sessions, directly or behind others
	first    string // the first wait on the holder: its wait event and statement
	err      error
}

func (w lockWaits) String() string {
	return fmt.Sprintf("in %d samples, a session waited for a lock in %d, on the frozen replica in %d%s",
		w.samples, w.waiting, w.onHolder, map[bool]string{true: " (the first: " + w.first + ")"}[w.first != ""])
}

// sampleLockWaits reads, every 20 ms until stop is closed, whether a session of the application
// named app waits for a lock (a heavyweight lock: a row, a table, an advisory lock), and whether
// a session of the application named holder is among those it waits for, or those they wait for.
func sampleLockWaits(db *sql.DB, app, holder string, stop <-chan struct{}) (w lockWaits) {
	for {
		var waiting, onHolder int
		var first sql.NullString
		err := db.QueryRow(`WITH RECURSIVE
			waiters AS (SELECT pid, wait_event || ': ' || query AS what FROM pg_stat_activity
				WHERE application_name = $1 AND wait_event_type = 'Lock'),
			blockers(waiter, pid) AS (
				SELECT w.pid, unnest(pg_blocking_pids(w.pid)) FROM waiters w
				UNION
				SELECT b.waiter, unnest(pg_blocking_pids(b.pid)) FROM blockers b),
			held AS (SELECT DISTINCT b.waiter FROM blockers b JOIN pg_stat_activity a ON a.pid = b.pid
				WHERE a.application_name = $2)
			SELECT (SELECT count(*) FROM waiters), (SELECT count(*) FROM held),
				(SELECT min(w.what) FROM waiters w JOIN held h ON h.waiter = w.pid)`, app, holder).Scan(&waiting, &onHolder, &first)
		if err != nil {
			w.err = fmt.Errorf("read the sessions of %q: %w", app, err)
			return w
		}
		w.samples++
		if waiting > 0 {
			w.waiting++
		}
		if onHolder > 0 {
			if w.onHolder == 0 {
				w.first = first.String
			}
			w.onHolder++
		}
		select {
		case <-stop:
			return w
		case <-time.After(20 * time.Millisecond):
		}
	}
}
