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

// TestPostgresOneReplicaPurgesAtATime has three stores on one database (three replicas, each with
// its own pool) call PurgeExpired at once, round after round: every due user is purged exactly once,
// by one of them, and the others find the lock taken, or nothing left, and purge nothing.
func TestPostgresOneReplicaPurgesAtATime(t *testing.T) {
	t.Parallel() // a store of its own: see open in sqlite_test.go
	dsn := storetest.PostgresSchema(t)
	ctx := context.Background()
	var replicas []*Store
	for range 3 {
		s, err := Open(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		replicas = append(replicas, s)
	}
	const rounds, perRound = 5, 20
	for round := range rounds {
		for i := range perRound {
			s := replicas[i%len(replicas)]
			u, err := s.CreateUser(ctx, store.NewUser{Name: fmt.Sprintf("user %d.%d", round, i)}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.SoftDeleteUser(ctx, u.ID, nil, time.Now().Add(-time.Minute)); err != nil {
				t.Fatal(err)
			}
		}
		start := make(chan struct{})
		purged := make([]int, len(replicas))
		errs := make([]error, len(replicas))
		var wg sync.WaitGroup
		for r, s := range replicas {
			wg.Go(func() {
				<-start
				purged[r], errs[r] = s.PurgeExpired(ctx, time.Now(), 1000)
			})
		}
		close(start)
		wg.Wait()
		purging, total := 0, 0
		for r, n := range purged {
			if errs[r] != nil {
				t.Fatalf("round %d, replica %d: %v", round, r, errs[r])
			}
			if n > 0 {
				purging++
			}
			total += n
		}
		if purging != 1 || total != perRound {
			t.Fatalf("round %d: the replicas purged %v, want all %d users purged by one of them", round, purged, perRound)
		}
	}

	// Each purge is in the log once: no user was purged by two replicas.
	purges := map[int32]int{}
	for after := int64(0); ; {
		page, err := replicas[0].UserEvents(ctx, after, 500)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page.Events {
			if e.Kind == store.EventPurged {
				purges[e.User.ID]++
			}
			after = e.Sequence
		}
		if len(page.Events) < 500 {
			break
		}
	}
	for id, n := range purges {
		if n != 1 {
			t.Errorf("user %d purged %d times", id, n)
		}
	}
	if len(purges) != rounds*perRound {
		t.Fatalf("%d users purged, want %d", len(purges), rounds*perRound)
	}
}

// TestPostgresAPurgeThatFindsTheLockTakenReturnsAtOnce: while another session holds the purge
// lock, PurgeExpired purges nothing and does not wait for it (a wait would last until the lock
// timeout); once the lock is free, the same call purges.
func TestPostgresAPurgeThatFindsTheLockTakenReturnsAtOnce(t *testing.T) {
	t.Parallel() // a store of its own: see open in sqlite_test.go
	dsn := storetest.PostgresSchema(t)
	ctx := context.Background()
	s, err := Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	u, err := s.CreateUser(ctx, store.NewUser{Name: "due"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SoftDeleteUser(ctx, u.ID, nil, time.Now().Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	holder, err := storetest.OpenPostgres(t, dsn).BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback()
	if _, err := holder.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(purgeLockKey)); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if n, err := s.PurgeExpired(ctx, time.Now(), 10); err != nil || n != 0 {
		t.Fatalf("a purge while another holds the lock: %d, %v; want 0", n, err)
	}
	if waited := time.Since(began); waited > time.Second {
		t.Fatalf("a purge that found the lock taken took %v, want it to return at once", waited)
	}
	if _, err := s.GetUserShowingDeleted(ctx, u.ID); err != nil {
		t.Fatalf("the due user after a purge that found the lock taken: %v, want it still there", err)
	}
	if err := holder.Rollback(); err != nil {
		t.Fatal(err)
	}
	if n, err := s.PurgeExpired(ctx, time.Now(), 10); err != nil || n != 1 {
		t.Fatalf("a purge once the lock is free: %d, %v; want 1", n, err)
	}
}
