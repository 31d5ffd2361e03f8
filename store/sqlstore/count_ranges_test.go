package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"usersd/store"
	"usersd/store/storetest"
)

// TestCoverSplitsARangeExactly: the spans and edges of a range hold each of its keys once and no
// other key, the edges are narrower than a finest bucket, and a span of a level below the coarsest
// is never wider than the fringes, short of a whole bucket of the next level, on both sides.
func TestCoverSplitsARangeExactly(t *testing.T) {
	k := bucketKind{kind: 9, shifts: []uint{2, 4, 6}, min: -1000, max: 1000}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 3000 {
		r := keyRange{int64(rng.IntN(600)) - 300, int64(rng.IntN(600)) - 300}
		if r.lo > r.hi {
			r.lo, r.hi = r.hi, r.lo
		}
		c := k.cover(r)
		held := map[int64]int{}
		for _, e := range c.edges {
			if e.hi-e.lo+1 >= 1<<k.shifts[0] && len(c.spans) > 0 {
				t.Fatalf("%v: edge %v is a whole bucket wide", r, e)
			}
			for key := e.lo; key <= e.hi; key++ {
				held[key]++
			}
		}
		for _, s := range c.spans {
			if s.level < len(k.shifts)-1 && s.last-s.first+1 > 2*(1<<(k.shifts[s.level+1]-k.shifts[s.level])-1) {
				t.Fatalf("%v: span %v is wider than two fringes of a bucket of the next level", r, s)
			}
			for b := s.first; b <= s.last; b++ {
				for key := b << k.shifts[s.level]; key < (b+1)<<k.shifts[s.level]; key++ {
					held[key]++
					if key < c.covered.lo || key > c.covered.hi {
						t.Fatalf("%v: span %v holds %d, outside the covered keys %v", r, s, key, c.covered)
					}
				}
			}
		}
		for key := int64(-400); key <= 400; key++ {
			want := 0
			if key >= r.lo && key <= r.hi {
				want = 1
			}
			if held[key] != want {
				t.Fatalf("%v (cover %+v): key %d held %d times, want %d", r, c, key, held[key], want)
			}
		}
	}
	// At the ends of int64 nothing overflows.
	for _, r := range []keyRange{{math.MinInt64, math.MaxInt64}, {math.MinInt64, 5}, {5, math.MaxInt64}} {
		c := createdAtBuckets.cover(r)
		if len(c.spans) == 0 || c.covered.lo > c.covered.hi {
			t.Errorf("%v: %+v", r, c)
		}
	}
}

func idCompare(c store.Comparison, v int64) store.Filter {
	return store.Filter{Op: store.FilterCompare, Field: store.FieldID, Cmp: c, Value: store.FilterValue{Kind: store.ValueInt, Int: v}}
}

func createdCompare(c store.Comparison, t time.Time) store.Filter {
	return store.Filter{Op: store.FilterCompare, Field: store.FieldCreatedAt, Cmp: c, Value: store.FilterValue{Kind: store.ValueTime, Time: t}}
}

// randomRanges draws range filters of every shape, their bounds near the users' keys and the
// buckets' edges, which lie at multiples of powers of two.
func randomRanges(rng *rand.Rand, ids []int64, times []int64, n int) []store.Filter {
	cmps := []store.Comparison{store.CompareLess, store.CompareLessOrEqual, store.CompareGreater, store.CompareGreaterOrEqual}
	near := func(keys []int64, shifts []uint) int64 {
		v := keys[rng.IntN(len(keys))]
		if rng.IntN(2) == 0 {
			shift := shifts[rng.IntN(len(shifts))]
			v = v >> shift << shift
		}
		return v + int64(rng.IntN(5)) - 2
	}
	var filters []store.Filter
	for range n {
		var one func() store.Filter
		if rng.IntN(2) == 0 {
			one = func() store.Filter { return idCompare(cmps[rng.IntN(4)], near(ids, idBuckets.shifts)) }
		} else {
			one = func() store.Filter {
				us := near(times, createdAtBuckets.shifts)
				at := time.UnixMicro(us)
				if rng.IntN(4) == 0 {
					at = at.Add(500 * time.Nanosecond) // between two microseconds
				}
				return createdCompare(cmps[rng.IntN(4)], at)
			}
		}
		f := one()
		if rng.IntN(2) == 0 {
			g := one()
			if g.Field == f.Field {
				f = store.Filter{Op: store.FilterAnd, Args: []store.Filter{f, g}}
			}
		}
		filters = append(filters, f)
	}
	return append(filters, idCompare(store.CompareGreater, math.MaxInt32), idCompare(store.CompareLess, math.MinInt32),
		idCompare(store.CompareGreaterOrEqual, -5), idCompare(store.CompareLessOrEqual, math.MaxInt64))
}

// wantExactTotals lists every filter with a page large enough for all its users: the total, read
// in the page's snapshot, must equal the users listed, whatever writes and folds run meanwhile.
func wantExactTotals(t *testing.T, s *Store, when string, filters []store.Filter) {
	t.Helper()
	ctx := context.Background()
	for _, f := range filters {
		q := store.UserQuery{Filter: &f, Limit: 1_000_000}
		if _, kept := s.dialect.keptCount(q); !kept {
			t.Fatalf("%s: filter %+v is not served by the buckets", when, f)
		}
		page, err := s.ListUsers(ctx, q)
		if err != nil {
			t.Fatalf("%s: %+v: %v", when, f, err)
		}
		if page.Total != int64(len(page.Items)) {
			count, _ := s.dialect.countStatement(q)
			t.Fatalf("%s: filter %s: total %d, %d users listed\n%s %v", when, describeRange(f), page.Total, len(page.Items), count.query, count.args)
		}
	}
}

func describeRange(f store.Filter) string {
	if f.Op == store.FilterAnd {
		return describeRange(f.Args[0]) + " AND " + describeRange(f.Args[1])
	}
	v := fmt.Sprint(f.Value.Int)
	if f.Field == store.FieldCreatedAt {
		v = f.Value.Time.Format(time.RFC3339Nano)
	}
	return fmt.Sprintf("field %d cmp %d %s", f.Field, f.Cmp, v)
}

// bucketUsers inserts n users with ids and creation times drawn around bucket edges of every
// level, through SQL (so that the ids can be chosen), as a bulk load would; the triggers count
// them as they count any insert. It returns their ids and times.
func bucketUsers(t *testing.T, s *Store, rng *rand.Rand, n int, deletedEvery int) (ids, times []int64) {
	t.Helper()
	overriding := ""
	if s.dialect == &postgresDialect {
		overriding = " OVERRIDING SYSTEM VALUE"
	}
	base := time.Now().UnixMicro() >> 42 << 42
	seen := map[int64]bool{}
	for len(ids) < n {
		// Ids from around 2^20 (every level's edge), away from the ones CreateUser hands out.
		id := int64(1<<20) + int64(rng.IntN(1<<16)) - 1<<15
		if seen[id] {
			continue
		}
		seen[id] = true
		at := base + rng.Int64N(1<<38) - 1<<37
		var deleted any
		if deletedEvery > 0 && len(ids)%deletedEvery == 0 {
			deleted = at + 1
		}
		if _, err := s.writer.Exec(`INSERT INTO users (id, name, name_key, role, created_at, updated_at, delete_time, purge_time)`+overriding+`
			VALUES ($1, $2, $2, 'viewer', $3, $3, $4, $4)`, int32(id), fmt.Sprint("user ", id), at, deleted); err != nil {
			t.Fatal(err)
		}
		ids, times = append(ids, id), append(times, at)
	}
	return ids, times
}

// rangeBackends opens a store of each backend for a test.
var rangeBackends = map[string]func(t testing.TB) string{
	"sqlite":   func(t testing.TB) string { return t.TempDir() + "/users.db" },
	"postgres": storetest.PostgresSchema,
}

func openStore(t *testing.T, dsn string) *Store {
	t.Helper()
	s, err := Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	waitForBuckets(t, s)
	return s
}

// waitForBuckets waits until the background build has marked the buckets whole.
func waitForBuckets(t *testing.T, s *Store) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; {
		var whole bool
		if err := s.writer.QueryRow(`SELECT ` + keptCountsWhole).Scan(&whole); err != nil {
			t.Fatal(err)
		}
		if whole {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the buckets were never built")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// wantExactAroundAFold checks the totals of filters before a fold of the pending deltas and after
// it: the two ways a kept count is read.
func wantExactAroundAFold(t *testing.T, s *Store, when string, filters func() []store.Filter) {
	t.Helper()
	wantExactTotals(t, s, when+" before a fold", filters())
	fold(t, s)
	wantExactTotals(t, s, when+" after a fold", filters())
}

// whileWritesAndABuild runs writers goroutines, each calling the write that newWriter makes for
// it until runFor has passed, and a build of the kept counts started an eighth of the way in,
// while the test calls read over and over; it fails the test on a writer's or the build's error,
// and returns once the kept counts are whole again.
func whileWritesAndABuild(t *testing.T, s *Store, writers int, runFor time.Duration, newWriter func(w int) func() error, read func()) {
	t.Helper()
	deadline := time.Now().Add(runFor)
	var work sync.WaitGroup
	errs := make(chan error, writers+1)
	for w := range writers {
		write := newWriter(w)
		work.Go(func() {
			for time.Now().Before(deadline) {
				if err := write(); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	work.Go(func() {
		time.Sleep(runFor / 8) // with writes under way
		if _, err := s.buildCountBuckets(context.Background()); err != nil {
			errs <- err
		}
	})
	for time.Now().Before(deadline) {
		read()
	}
	work.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	waitForBuckets(t, s)
}

// fold runs the dialect's fold now, beside the background one.
func fold(t *testing.T, s *Store) {
	t.Helper()
	if err := s.dialect.foldCounts(context.Background(), s.writer); err != nil {
		t.Fatal(err)
	}
}

// TestRangeTotalsStayExactThroughEveryWrite creates, batch-creates, soft-deletes, restores,
// purges and deletes users across bucket edges of every level, and checks the total of random
// ranges of id and created_at against the users listed, before and after folds, on both backends.
func TestRangeTotalsStayExactThroughEveryWrite(t *testing.T) {
	for name, dsn := range rangeBackends {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s := openStore(t, dsn(t))
			rng := rand.New(rand.NewPCG(7, 7))
			ids, times := bucketUsers(t, s, rng, 1500, 9)
			for i := range 40 {
				u, err := s.CreateUser(ctx, store.NewUser{Name: fmt.Sprint("created ", i)}, nil)
				if err != nil {
					t.Fatal(err)
				}
				ids, times = append(ids, int64(u.ID)), append(times, u.CreatedAt.UnixMicro())
			}
			filters := func() []store.Filter { return randomRanges(rng, ids, times, 60) }
			wantExactAroundAFold(t, s, "at first", filters)
			for round := range 6 {
				for range 40 {
					id := int32(ids[rng.IntN(len(ids))])
					var err error
					switch rng.IntN(5) {
					case 0:
						_, err = s.SoftDeleteUser(ctx, id, nil, time.Now().Add(time.Hour))
					case 1:
						_, err = s.UndeleteUser(ctx, id, nil)
					case 2:
						err = s.PurgeUser(ctx, id, nil)
					case 3:
						err = s.DeleteUser(ctx, id, nil)
					case 4:
						var us []store.User
						us, err = s.CreateUsers(ctx, []store.NewUser{{Name: "batch a"}, {Name: "batch b"}}, nil)
						for _, u := range us {
							ids, times = append(ids, int64(u.ID)), append(times, u.CreatedAt.UnixMicro())
						}
					}
					if err != nil && !errors.Is(err, store.ErrNotFound) {
						t.Fatal(err)
					}
				}
				wantExactAroundAFold(t, s, fmt.Sprint("round ", round), filters)
			}
		})
	}
}

// TestRangeTotalsStayExactUnderConcurrentWrites reads totals of ranges while writers create and
// delete users, and while the buckets are rebuilt from a snapshot (as after the migration): every
// total must match the page read with it, during the load and after the last fold.
func TestRangeTotalsStayExactUnderConcurrentWrites(t *testing.T) {
	for name, dsn := range rangeBackends {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s := openStore(t, dsn(t))
			rng := rand.New(rand.NewPCG(3, 3))
			ids, times := bucketUsers(t, s, rng, 1000, 5)
			// Buckets gone and wrong: the build must find what is missing, whatever else it finds.
			for _, stmt := range []string{`DELETE FROM user_count_buckets WHERE kind = 0`, `UPDATE user_count_buckets SET n = n + 3 WHERE level = 1`} {
				if _, err := s.writer.Exec(stmt); err != nil {
					t.Fatal(err)
				}
			}
			filters := randomRanges(rng, ids, times, 40)
			newWriter := func(w int) func() error {
				rng := rand.New(rand.NewPCG(uint64(w), 9))
				var mine []int32
				return func() error {
					var err error
					if rng.IntN(3) > 0 || len(mine) == 0 {
						var u store.User
						u, err = s.CreateUser(ctx, store.NewUser{Name: "writer"}, nil)
						mine = append(mine, u.ID)
					} else if rng.IntN(2) == 0 {
						_, err = s.SoftDeleteUser(ctx, mine[rng.IntN(len(mine))], nil, time.Now().Add(time.Hour))
					} else {
						_, err = s.SoftDeleteUser(ctx, int32(ids[rng.IntN(len(ids))]), nil, time.Now().Add(time.Hour))
					}
					if errors.Is(err, store.ErrNotFound) {
						err = nil
					}
					return err
				}
			}
			whileWritesAndABuild(t, s, 4, 2500*time.Millisecond, newWriter, func() { wantExactTotals(t, s, "under writes", filters[:10]) })
			wantExactTotals(t, s, "after the writes", filters)
			fold(t, s)
			wantExactTotals(t, s, "after a last fold", filters)
		})
	}
}

// TestRecountUsersRebuildsTheBuckets: buckets that a load around the triggers left wrong are right
// again after RecountUsers.
func TestRecountUsersRebuildsTheBuckets(t *testing.T) {
	for name, dsn := range rangeBackends {
		t.Run(name, func(t *testing.T) {
			s := openStore(t, dsn(t))
			rng := rand.New(rand.NewPCG(5, 5))
			ids, times := bucketUsers(t, s, rng, 600, 4)
			fold(t, s)
			for _, stmt := range []string{`DELETE FROM user_count_buckets WHERE level = 0`, `UPDATE user_count_buckets SET n = n * 2 WHERE kind = 2`} {
				if _, err := s.writer.Exec(stmt); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := s.RecountUsers(context.Background()); err != nil {
				t.Fatal(err)
			}
			wantExactTotals(t, s, "after the recount", randomRanges(rng, ids, times, 60))
		})
	}
}

// TestRangeCountStatementShape: a range is counted from the buckets only in a list without deleted
// users, role or name search.
func TestRangeCountStatementShape(t *testing.T) {
	f := idCompare(store.CompareGreater, 1000)
	st, ok := sqliteDialect.keptCount(store.UserQuery{Filter: &f})
	if !ok || !strings.Contains(st.query, "user_count_buckets") {
		t.Fatalf("id > 1000: %v %s", ok, st.query)
	}
	for _, q := range []store.UserQuery{{Filter: &f, ShowDeleted: true}, {Filter: &f, Role: "admin"}, {Filter: &f, NamePrefix: "a"}} {
		if _, ok := sqliteDialect.keptCount(q); ok {
			t.Errorf("%+v is served by the buckets", q)
		}
	}
}
