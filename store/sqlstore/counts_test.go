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

// TestRecountUsersRebuildsTheKeptCounts: counts that a load around the triggers left wrong (here:
// gone, and on PostgreSQL with stray deltas) are whole again after RecountUsers, on both backends,
// and the totals that lists answer with are the real ones.
func TestRecountUsersRebuildsTheKeptCounts(t *testing.T) {
	backends := map[string]func(t testing.TB) string{
		"sqlite":   func(t testing.TB) string { return t.TempDir() + "/users.db" },
		"postgres": storetest.PostgresSchema,
	}
	for name, dsn := range backends {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s, err := Open(ctx, dsn(t))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			for i, role := range []string{"admin", "admin", "", "editor", "admin"} {
				if _, err := s.CreateUser(ctx, store.NewUser{Name: fmt.Sprint("user ", i), Role: role}, nil); err != nil {
					t.Fatal(err)
				}
			}
			broken := []string{`DELETE FROM user_counts`, `INSERT INTO user_counts (scope, n) VALUES ('role:ghost', 3)`}
			if name == "postgres" {
				broken = append(broken, `INSERT INTO user_count_deltas (scope, delta) VALUES ('all', 40), ('role:admin', -2)`)
			}
			for _, stmt := range broken {
				if _, err := s.writer.ExecContext(ctx, stmt); err != nil {
					t.Fatalf("%s: %v", stmt, err)
				}
			}

			counts, err := s.RecountUsers(ctx)
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]int64{"all": 5, "role:admin": 3, "role:": 1, "role:editor": 1}
			if fmt.Sprint(counts) != fmt.Sprint(want) {
				t.Fatalf("RecountUsers = %v, want %v", counts, want)
			}
			for role, n := range map[string]int64{"": 5, "admin": 3, "editor": 1, "ghost": 0} {
				page, err := s.ListUsers(ctx, store.UserQuery{Role: role, Limit: 1})
				if err != nil || page.Total != n {
					t.Errorf("total of role %q after the recount: %d (%v), want %d", role, page.Total, err, n)
				}
			}
		})
	}
}
