package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"usersd/store"
	"usersd/store/storetest"
)

// TestPostgresCountsStayExactAcrossReplicas has three stores on one database (three replicas, each
// with its own pool and its own folding) create, re-role and delete users at once, for long enough
// that folds run under the load, and reads totals throughout. Every total must then equal a real
// COUNT(*), and every total read during the load must have matched the page it came with.
func TestPostgresCountsStayExactAcrossReplicas(t *testing.T) {
	dsn := storetest.PostgresSchema(t)
	ctx := context.Background()
	roles := []string{"", "admin", "editor", "viewer"}
	var replicas []*Store
	for range 3 {
		s, err := Open(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		replicas = append(replicas, s)
	}
	deadline := time.Now().Add(2500 * time.Millisecond) // spans at least two folds of every replica
	var writes, reads sync.WaitGroup
	errs := make(chan error, 100)
	for w := range 24 {
		s := replicas[w%len(replicas)]
		writes.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			var mine []int32
			for time.Now().Before(deadline) {
				switch draw := rng.IntN(10); {
				case draw < 6 || len(mine) == 0:
					u, err := s.CreateUser(ctx, store.NewUser{Name: fmt.Sprint("user ", w), Role: roles[rng.IntN(len(roles))]}, nil)
					if err != nil {
						errs <- err
						return
					}
					mine = append(mine, u.ID)
				case draw < 8:
					role := roles[rng.IntN(len(roles))]
					if _, err := s.UpdateUser(ctx, mine[rng.IntN(len(mine))], store.UserChanges{Role: &role}, nil); err != nil {
						errs <- err
						return
					}
				default:
					i := rng.IntN(len(mine))
					if err := s.DeleteUser(ctx, mine[i], nil); err != nil {
						errs <- err
						return
					}
					mine = append(mine[:i], mine[i+1:]...)
				}
			}
		})
	}
	// A page of every user of one role read with its total: both come from one snapshot, so the
	// total equals the number listed, whatever the writers and the folds do meanwhile.
	for r := range 3 {
		reads.Go(func() {
			for time.Now().Before(deadline) {
				page, err := replicas[r].ListUsers(ctx, store.UserQuery{Role: "admin", Limit: 100_000})
				if err != nil {
					errs <- err
					return
				}
				if page.Total != int64(len(page.Items)) {
					errs <- fmt.Errorf("replica %d read a total of %d admins beside %d listed", r, page.Total, len(page.Items))
					return
				}
			}
		})
	}
	writes.Wait()
	reads.Wait()
	close(errs)
	if err := errors.Join(func() (all []error) {
		for err := range errs {
			all = append(all, err)
		}
		return all
	}()...); err != nil {
		t.Fatal(err)
	}

	wantTotals := func(when string) {
		t.Helper()
		for _, role := range append(roles, "nobody") {
			var counted int64
			query, args := `SELECT COUNT(*) FROM users`, []any{}
			if role != "" {
				query, args = query+` WHERE role = $1`, []any{role}
			}
			if err := replicas[0].reader.QueryRow(query, args...).Scan(&counted); err != nil {
				t.Fatal(err)
			}
			for i, s := range replicas {
				page, err := s.ListUsers(ctx, store.UserQuery{Role: role, Limit: 1})
				if err != nil {
					t.Fatal(err)
				}
				if page.Total != counted {
					t.Errorf("%s: replica %d says %d users with role %q, COUNT(*) says %d", when, i, page.Total, role, counted)
				}
			}
		}
	}
	wantTotals("after the load")
	var folded int64
	if err := replicas[0].reader.QueryRow(`SELECT COUNT(*) FROM user_counts`).Scan(&folded); err != nil || folded == 0 {
		t.Fatalf("no fold ran during the load (%d rows in user_counts, %v)", folded, err)
	}
	if err := foldCountDeltas(ctx, replicas[1].writer); err != nil {
		t.Fatal(err)
	}
	var left int64
	if err := replicas[0].reader.QueryRow(`SELECT COUNT(*) FROM user_count_deltas`).Scan(&left); err != nil || left != 0 {
		t.Fatalf("after a fold with no writer, %d deltas are left (%v)", left, err)
	}
	wantTotals("after a last fold")
}
