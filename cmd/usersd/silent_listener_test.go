package main

import (
	"syscall"
	"testing"
	"time"

	"usersd/internal/apitest"
	"usersd/store/storetest"
)

// TestASilentListeningConnectionIsReplaced black-holes the connections of a replica whose watch
// has it listening for other replicas' changes, as a proxy or a NAT does that still answers TCP for
// a server that is gone: the keepalives then find nothing wrong, and before the listener pinged a
// silent connection it waited for a notice for ever, leaving the watches to the 1 s poll. The
// replica must notice within its probe's 15 s, say so, and listen again once the network heals.
func TestASilentListeningConnectionIsReplaced(t *testing.T) {
	dsn := storetest.PostgresSchema(t)
	proxy := startFaultProxy(t, dsn)
	cmd, s, logs := startProcess(t, proxy.dsn)
	watch := apitest.StartWatch(t, s.Server, apitest.WatchProtocols()[0], -1, "")
	defer watch.Cancel()
	time.Sleep(time.Second) // the listener connects once the first watch starts

	proxy.blackhole()
	faulted := time.Now()
	time.Sleep(17 * time.Second)
	proxy.restore()
	restored := time.Now()
	time.Sleep(25 * time.Second) // a connection attempt lost in the black hole times out after 10 s

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
	if noticed.IsZero() || noticed.Before(faulted) || noticed.Sub(faulted) > 16*time.Second {
		t.Fatalf("the silent listening connection was noticed at %v, %v after the fault; want within 16 s", noticed, noticed.Sub(faulted))
	}
	if again.Before(restored) {
		t.Fatalf("the replica did not listen again within 25 s of the network healing (last said so at %v)", again)
	}
	t.Logf("noticed %v after the fault; listening again %v after the network healed",
		noticed.Sub(faulted).Round(time.Millisecond), again.Sub(restored).Round(time.Millisecond))
}
