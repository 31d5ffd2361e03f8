package sqlstore_test

// BenchmarkBatchCreate1000 compares a batch create of a thousand users (POST /users:batchCreate)
// with the same thousand users created one at a time, by one client in turn and by many at once
// (whose creates group commit batches), on SQLite and, when one answers, on PostgreSQL. Each
// reports users/s, the figure the batches were made for:
//
//	go test ./store/sqlstore -run '^$' -bench BatchCreate1000 -benchtime 20x

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"usersd/store"
	"usersd/store/sqlstore"
	"usersd/store/storetest"
)

// batchSize is the users of one batch: the most a batch may hold.
const batchSize = 1000

// serial numbers the benchmark's users across every run, so that their unique values never clash.
var serial atomic.Int64

// typicalNewUser is a user as a provisioning system sends it: every identity field, two labels.
func typicalNewUser() store.NewUser {
	n := serial.Add(1)
	return store.NewUser{Name: fmt.Sprintf("Ada Lovelace %d", n), Role: "engineer", Identity: store.Identity{
		UserName: fmt.Sprintf("ada.lovelace.%d", n), GivenName: "Ada", FamilyName: "Lovelace",
		Email: fmt.Sprintf("ada.lovelace.%d@example.com", n), ExternalID: fmt.Sprintf("8f14e45f-ceea-467f-a0e6-%012d", n),
		Labels: map[string]string{"department": "analytical-engines", "location": "london"},
	}}
}

func BenchmarkBatchCreate1000(b *testing.B) {
	backends := []struct {
		name string
		open func(b *testing.B) *sqlstore.Store
	}{
		{"sqlite", func(b *testing.B) *sqlstore.Store {
			return benchOpen(b, filepath.Join(b.TempDir(), "users.db"))
		}},
		{"postgres", func(b *testing.B) *sqlstore.Store { return benchOpen(b, storetest.PostgresSchema(b)) }},
	}
	ways := []struct {
		name   string
		create func(b *testing.B, ctx context.Context, st *sqlstore.Store, users []store.NewUser)
	}{
		{"batch", func(b *testing.B, ctx context.Context, st *sqlstore.Store, users []store.NewUser) {
			if _, err := st.CreateUsers(ctx, users, nil); err != nil {
				b.Fatal(err)
			}
		}},
		{"single-in-turn", func(b *testing.B, ctx context.Context, st *sqlstore.Store, users []store.NewUser) {
			for _, u := range users {
				if _, err := st.CreateUser(ctx, u, nil); err != nil {
					b.Fatal(err)
				}
			}
		}},
		{"single-64-at-once", func(b *testing.B, ctx context.Context, st *sqlstore.Store, users []store.NewUser) {
			var wg sync.WaitGroup
			next := atomic.Int64{}
			for range 64 {
				wg.Go(func() {
					for i := next.Add(1) - 1; i < int64(len(users)); i = next.Add(1) - 1 {
						if _, err := st.CreateUser(ctx, users[i], nil); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
		}},
	}
	for _, backend := range backends {
		for _, way := range ways {
			b.Run(backend.name+"/"+way.name, func(b *testing.B) {
				st := backend.open(b)
				ctx := store.WithActor(context.Background(), store.Actor{Name: "bench", Type: store.ActorAPIKey})
				created := 0
				for b.Loop() {
					b.StopTimer()
					users := make([]store.NewUser, batchSize)
					for i := range users {
						users[i] = typicalNewUser()
					}
					b.StartTimer()
					way.create(b, ctx, st, users)
					created += len(users)
				}
				b.ReportMetric(float64(created)/b.Elapsed().Seconds(), "users/s")
			})
		}
	}
}

// benchOpen opens the store at dsn for the benchmark alone.
func benchOpen(b *testing.B, dsn string) *sqlstore.Store {
	b.Helper()
	st, err := sqlstore.Open(context.Background(), dsn)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st
}
