package sqlstore

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"usersd/store"
	"usersd/store/storetest"
)

// TestPostgresWritesOutliveAPoolOfDeadConnections: pgx stops a statement whose request ended by
// closing its connection, so that clients leaving all at once (a load balancer restarting, a
// client's deploy) leave a pool of dead connections behind them. database/sql tries four of them
// for a transaction before it gives up, and with every connection busy the fourth is one handed
// over by another request, dead too. The writes waiting for the pool then must still be made, on
// connections opened again, not refused as unavailable.
func TestPostgresWritesOutliveAPoolOfDeadConnections(t *testing.T) {
	s, err := Open(t.Context(), storetest.PostgresSchema(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const pool = 16 // newPostgresPool's

	// Every connection of the pool in a statement whose request will end.
	ended, end := context.WithCancel(t.Context())
	var sleepers sync.WaitGroup
	for range pool {
		sleepers.Go(func() { s.writer.ExecContext(ended, `SELECT pg_sleep(30)`) })
	}
	for deadline := time.Now().Add(10 * time.Second); s.writer.Stats().InUse < pool; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d connections in use", s.writer.Stats().InUse, pool)
		}
	}

	// Writes that wait for the pool, then the requests of the statements end.
	const writes = 32
	errs := make(chan error, writes)
	var writers sync.WaitGroup
	for i := range writes {
		writers.Go(func() {
			_, err := s.CreateUser(t.Context(), store.NewUser{Name: fmt.Sprintf("after %d", i)}, nil)
			errs <- err
		})
	}
	for deadline := time.Now().Add(10 * time.Second); s.writer.Stats().WaitCount == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no write waits for the pool")
		}
	}
	end()
	sleepers.Wait()
	writers.Wait()
	close(errs)
	failed := 0
	for err := range errs {
		if err != nil {
			failed++
			t.Log(err)
		}
	}
	if failed > 0 {
		t.Errorf("%d of %d writes failed after the pool's connections died", failed, writes)
	}
}
