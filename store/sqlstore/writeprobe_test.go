package sqlstore_test

import (
	"errors"
	"testing"
	"time"

	"usersd/store"
	"usersd/store/storetest"
)

// TestPostgresPingFailsWhileWritesCannotCommit: a primary whose synchronous standby is gone still
// answers and is no standby, but no write commits (each waits for the standby): Ping says so
// within a few seconds, without waiting for a commit longer than its probe's deadline, and says the
// store is well again once the standby is back. This is the readiness of a replica (/readyz and
// gRPC health).
func TestPostgresPingFailsWhileWritesCannotCommit(t *testing.T) {
	t.Parallel() // a store of its own: see open in sqlite_test.go
	c := storetest.StartCluster(t)
	s := open(t, c.Primary.URL())
	defer s.Close()
	if err := s.Ping(t.Context()); err != nil {
		t.Fatalf("a primary with its synchronous standby: %v", err)
	}

	c.Sync.Stop(t)
	stopped := time.Now()
	var err error
	for err = s.Ping(t.Context()); err == nil; err = s.Ping(t.Context()) {
		if time.Since(stopped) > 5*time.Second {
			t.Fatal("Ping still says the store takes writes 5 s after its synchronous standby stopped")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Ping without the synchronous standby: %v, want unavailable", err)
	}
	t.Logf("Ping failed %v after the synchronous standby stopped: %v", time.Since(stopped).Round(time.Millisecond), err)
	start := time.Now()
	s.Ping(t.Context()) // a probe under way, or a new one: neither waits for a commit past its deadline
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("a Ping took %v while no write commits", took)
	}

	c.Sync.Start(t)
	deadline := time.Now().Add(30 * time.Second) // a hang detector: the standby catches up in seconds
	for s.Ping(t.Context()) != nil {
		if time.Now().After(deadline) {
			t.Fatalf("Ping still fails 30 s after the synchronous standby came back: %v", s.Ping(t.Context()))
		}
		time.Sleep(100 * time.Millisecond)
	}
}
