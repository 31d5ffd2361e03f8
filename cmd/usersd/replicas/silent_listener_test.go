package replicas_test

import (
	"database/sql"
	"errors"
	"syscall"
	"testing"
	"time"

	"usersd/internal/apitest"
	"usersd/internal/proctest"
	"usersd/store/storetest"
)

// TestASilentListeningConnectionIsReplaced black-holes the connections of a replica whose watch
// has it listening for other replicas' changes, as a proxy or a NAT does that still answers TCP for
// a server that is gone: the keepalives then find nothing wrong, and before the listener pinged a
// silent connection it waited for a notice for ever, leaving the watches to the 1 s poll. The
// replica must notice within its probe's 15 s (10 s between pings, 5 s for an answer), say so, and
// listen again once the network heals.
//
// The black hole lasts 20 s, and the replica must have noticed before it ends: a bound with room
// for a machine busy compiling something else, where 16 s after a black hole of 17 s had little.
// The listening connections are waited for in pg_stat_activity rather than slept for.
func TestASilentListeningConnectionIsReplaced(t *testing.T) {
	t.Parallel() // mostly waits on faults and timeouts: see startProcess
	dsn := storetest.PostgresSchema(t)
	proxy := proctest.StartFaultProxy(t, dsn)
	const app = "usersd-silent-listener-test" // the listener keeps the name the URL gives
	cmd, s, logs := startProcess(t, storetest.WithURLParam(t, proxy.DSN, "application_name", app))
	db := storetest.OpenPostgres(t, dsn)
	watch := apitest.StartWatch(t, s.Server, apitest.WatchProtocols()[0], -1, "")
	defer watch.Cancel()
	first := waitForListening(t, db, app, 0) // the listener connects once the first watch starts

	proxy.Blackhole()
	faulted := time.Now()
	time.Sleep(20 * time.Second)
	proxy.Restore()
	restored := time.Now()
	waitForListening(t, db, app, first) // after a connection attempt lost in the black hole times out (10 s)

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	var noticed, again time.Time
	for _, line := range <-logs {
		at, _ := time.Parse(time.RFC3339Nano, line["time"].(string))
		switch line["msg"] {
		case "not listening for other replicas' changes: watches see them by polling, within a second, until the connection is back":
			if noticed.IsZero() {
				noticed = at
			}
		case "listening for other replicas' changes again":
			again = at
		}
	}
	if noticed.IsZero() || noticed.Before(faulted) || noticed.After(restored) {
		t.Fatalf("the silent listening connection was noticed at %v, %v after the fault; want before the network healed, %v after it",
			noticed, noticed.Sub(faulted), restored.Sub(faulted))
	}
	if again.Before(restored) {
		t.Fatalf("the replica did not say it listened again after the network healed (last said so at %v)", again)
	}
	t.Logf("noticed %v after the fault; listening again %v after the network healed",
		noticed.Sub(faulted).Round(time.Millisecond), again.Sub(restored).Round(time.Millisecond))
}

// waitForListening waits for a connection named app, other than that of server process not (0
// for any), to have listened for changes, and returns its server process id. Its bound of a minute
// is a hang detector.
func waitForListening(t *testing.T, db *sql.DB, app string, not int) int {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		var pid int
		err := db.QueryRow(`SELECT pid FROM pg_stat_activity
			WHERE application_name = $1 AND query LIKE 'LISTEN%' AND state = 'idle' AND pid <> $2`, app, not).Scan(&pid)
		switch {
		case err == nil:
			// LISTEN has returned; the process logs that it listens just after.
			time.Sleep(100 * time.Millisecond)
			return pid
		case !errors.Is(err, sql.ErrNoRows):
			t.Fatal(err)
		case time.Now().After(deadline):
			t.Fatalf("no connection named %q (other than %d) listened within a minute", app, not)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
