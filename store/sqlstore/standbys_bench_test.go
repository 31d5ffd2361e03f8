package sqlstore_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"usersd/store"
	"usersd/store/sqlstore"
	"usersd/store/storetest"
)

// BenchmarkReadsOnStandbys reads users by id on a real cluster, from the primary alone and spread
// over two standbys, and reports the primary's processor time per read (primary-µs/read: its
// backends', the prober's samples included): what standbys take off the primary. docs/PERFORMANCE.md
// has the figures and the command.
func BenchmarkReadsOnStandbys(b *testing.B) {
	c := storetest.StartCluster(b)
	ids := seedUsers(b, c, 1000)
	for _, bc := range readTopologies(c) {
		b.Run(bc.name, func(b *testing.B) {
			s, err := sqlstore.Open(context.Background(), c.Primary.URL(), bc.opts...)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			time.Sleep(500 * time.Millisecond) // the prober's first samples
			before := c.Primary.CPU(b)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := s.GetUser(context.Background(), ids[rand.IntN(len(ids))]); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64((c.Primary.CPU(b)-before).Microseconds())/float64(b.N), "primary-µs/read")
		})
	}
}

// BenchmarkReadAfterWrite creates a user and at once reads it with the create's position: from the
// primary alone, and with two standbys, where the read waits for a standby that has replayed the
// create or falls back to the primary. It reports the read's latency (read-p50-µs, read-p99-µs),
// not the create's.
func BenchmarkReadAfterWrite(b *testing.B) {
	c := storetest.StartCluster(b)
	for _, bc := range readTopologies(c) {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			s, err := sqlstore.Open(ctx, c.Primary.URL(), bc.opts...)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			time.Sleep(500 * time.Millisecond)
			var reads []time.Duration
			b.ResetTimer()
			for b.Loop() {
				u, err := s.CreateUser(ctx, store.NewUser{Name: "written"}, nil)
				if err != nil {
					b.Fatal(err)
				}
				at, err := s.Position(ctx)
				if err != nil {
					b.Fatal(err)
				}
				began := time.Now()
				if _, err := s.GetUser(store.WithFreshness(ctx, store.Freshness{After: at, Primary: at == 0}), u.ID); err != nil {
					b.Fatal(err)
				}
				reads = append(reads, time.Since(began))
			}
			slices.Sort(reads)
			b.ReportMetric(float64(reads[len(reads)/2].Microseconds()), "read-p50-µs")
			b.ReportMetric(float64(reads[len(reads)*99/100].Microseconds()), "read-p99-µs")
			routes := map[string]int64{}
			for _, r := range s.ReadRoutes() {
				if r.Reads > 0 {
					routes[map[bool]string{true: "standby/", false: "primary/"}[r.Standby]+r.Reason] += r.Reads
				}
			}
			if len(routes) > 0 {
				b.Logf("read routes over %d reads: %v", len(reads), routes)
			}
		})
	}
}

// readTopology is where a store reads: the primary alone, or two standbys beside it.
type readTopology struct {
	name string
	opts []sqlstore.Option
}

func readTopologies(c *storetest.Cluster) []readTopology {
	return []readTopology{
		{"primary-alone", nil},
		{"two-standbys", []sqlstore.Option{sqlstore.WithReadStandbys([]string{c.Sync.URL(), c.Async.URL()}, time.Second)}},
	}
}

// seedUsers creates n users on the cluster's primary and waits until both standbys hold them.
func seedUsers(b *testing.B, c *storetest.Cluster, n int) []int32 {
	b.Helper()
	s, err := sqlstore.Open(context.Background(), c.Primary.URL())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ids := make([]int32, n)
	for i := range ids {
		u, err := s.CreateUser(context.Background(), store.NewUser{Name: "seeded"}, nil)
		if err != nil {
			b.Fatal(err)
		}
		ids[i] = u.ID
	}
	time.Sleep(time.Second)
	return ids
}
