package sqlstore_test

// Benchmarks of the SQLite store on a file, as usersd runs it: one user by id, the first page of
// the newest users and a page of one role (at 1,000 and 100,000 users, to show how each grows with
// the table), and a durable create. Compare before and after a change with benchstat; see
// docs/PERFORMANCE.md.
//
//	go test ./store/sqlstore -run '^$' -bench . -benchmem -count 10 > old.txt

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite" // the driver the store uses, for the bulk insert below

	"usersd/store"
	"usersd/store/sqlstore"
)

// benchRoles are the roles of the seeded users, in turn; "" is a user without a role.
var benchRoles = []string{"viewer", "editor", "viewer", "", "viewer", "admin", "viewer", "editor"}

// benchSeeded returns a store on a new file holding n users. The schema comes from sqlstore.Open;
// the rows go in through database/sql in one transaction, which is much faster than n creates.
func benchSeeded(b *testing.B, n int) *sqlstore.Store {
	return benchSeededWithout(b, n, nil)
}

// benchSeededWithout is benchSeeded with the statements in drop run on the seeded file before the
// store opens it: a benchmark that leaves part of the schema out, to tell what that part costs.
func benchSeededWithout(b *testing.B, n int, drop []string) *sqlstore.Store {
	b.Helper()
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "users.db")
	st, err := sqlstore.Open(ctx, path)
	if err != nil {
		b.Fatal(err)
	}
	if err := st.Close(); err != nil {
		b.Fatal(err)
	}

	db, err := sql.Open("sqlite", path+"?_pragma=synchronous(OFF)")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	insert, err := tx.PrepareContext(ctx, `INSERT INTO users (id, name, role, created_at, updated_at, version) VALUES ($1, $2, $3, $4, $4, 1)`)
	if err != nil {
		b.Fatal(err)
	}
	start := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := 1; i <= n; i++ {
		// Creation times mostly follow ids, with jitter and ties, as in bench/cmd/seed.
		created := start.Add(time.Duration(i)*30*time.Second + time.Duration(i*7919%90)*time.Second)
		if _, err := insert.ExecContext(ctx, i, fmt.Sprintf("Bench User %d", i), benchRoles[i%len(benchRoles)], created.UnixMicro()); err != nil {
			b.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
	for _, statement := range drop {
		if _, err := db.ExecContext(ctx, statement); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := db.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		b.Fatal(err)
	}

	st, err = sqlstore.Open(ctx, path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st
}

// BenchmarkGetUser reads users 1..1000 in turn by id.
func BenchmarkGetUser(b *testing.B) {
	const n = 1000
	st := benchSeeded(b, n)
	ctx := context.Background()
	id := int32(0)
	b.ReportAllocs()
	for b.Loop() {
		id = id%n + 1
		if _, err := st.GetUser(ctx, id); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkListUsersNewestFirst reads the first page of GET /users?sort=-createdAt&limit=20: 20
// users and the total count, in one snapshot.
func BenchmarkListUsersNewestFirst(b *testing.B) {
	benchList(b, store.UserQuery{Sort: []store.SortKey{{Field: store.SortByCreatedAt, Descending: true}}, Limit: 20})
}

// BenchmarkListUsersByRole reads page 5 of GET /users?role=editor: one role, by id.
func BenchmarkListUsersByRole(b *testing.B) {
	benchList(b, store.UserQuery{Role: "editor", Offset: 80, Limit: 20})
}

func benchList(b *testing.B, q store.UserQuery) {
	for _, n := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("users=%d", n), func(b *testing.B) {
			st := benchSeeded(b, n)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				page, err := st.ListUsers(ctx, q)
				if err != nil {
					b.Fatal(err)
				}
				if len(page.Items) != q.Limit {
					b.Fatalf("%d users, want %d", len(page.Items), q.Limit)
				}
			}
		})
	}
}

// BenchmarkCreateUser creates users one after another, each committed durably (the WAL is synced
// on every commit), as POST /users does without an idempotency key.
func BenchmarkCreateUser(b *testing.B) {
	st := benchSeeded(b, 1000)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := st.CreateUser(ctx, store.NewUser{Name: "Bench User", Role: "viewer"}, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCreateUsersConcurrently is 64 creates at a time, as 64 clients make them, so that group
// commit batches them. Run it with -cpu 1: ns/op is then the time of the one core that every
// create shares (the sync to disk included, which the core waits for), and cpu-ns/op the process's
// CPU time a create costs the store. Each variant
// leaves out one part of what every create writes beside its row (the indexes that keep every
// sort of a list fast at any size, the change log that watches read, the counts that totals
// read), so that the difference from "full" is what that part costs a create:
//
//	go test ./store/sqlstore -run '^$' -bench CreateUsersConcurrently -cpu 1 -count 6
func BenchmarkCreateUsersConcurrently(b *testing.B) {
	listIndexes := []string{"users_name_id", "users_role_id", "users_created_at_id", "users_name_desc_id",
		"users_role_desc_id", "users_created_at_desc_id", "users_role_name_id", "users_role_name_desc_id",
		"users_role_created_at_id", "users_role_created_at_desc_id"}
	var dropIndexes []string
	for _, name := range listIndexes {
		dropIndexes = append(dropIndexes, "DROP INDEX "+name)
	}
	for _, variant := range []struct {
		name string
		drop []string
	}{
		{"full", nil},
		{"without-list-indexes", dropIndexes},
		{"without-change-log", []string{"DROP TRIGGER users_event_insert"}},
		{"without-counts", []string{"DROP TRIGGER users_count_insert"}},
	} {
		b.Run(variant.name, func(b *testing.B) {
			st := benchSeededWithout(b, 1000, variant.drop)
			ctx := store.WithActor(context.Background(), store.Actor{Name: "bench", Type: store.ActorAPIKey})
			before, cpuBefore := st.WriteBatches(), processCPU(b)
			b.SetParallelism(64) // goroutines per P: 64 at -cpu 1
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := st.CreateUser(ctx, store.NewUser{Name: "Bench User", Role: "viewer"}, nil); err != nil {
						b.Error(err)
						return
					}
				}
			})
			after, cpu := st.WriteBatches(), processCPU(b)-cpuBefore
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
			if commits := after.Commits - before.Commits; commits > 0 {
				b.ReportMetric(float64(after.Writes-before.Writes)/float64(commits), "creates/commit")
			}
		})
	}
}

// processCPU is the CPU time, user and system, that the process has used so far.
func processCPU(b *testing.B) time.Duration {
	var usage syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &usage); err != nil {
		b.Fatal(err)
	}
	return time.Duration(usage.Utime.Nano() + usage.Stime.Nano())
}
