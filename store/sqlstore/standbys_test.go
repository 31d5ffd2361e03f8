package sqlstore_test

import (
	"context"
	"errors"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"usersd/store"
	"usersd/store/sqlstore"
	"usersd/store/storetest"
)

// openWithStandbys opens a store on the cluster's primary that reads from both standbys.
func openWithStandbys(t *testing.T, c *storetest.Cluster, maxLag time.Duration) *sqlstore.Store {
	t.Helper()
	return open(t, c.Primary.URL(), sqlstore.WithReadStandbys([]string{c.Sync.URL(), c.Async.URL()}, maxLag))
}

// reads returns how many reads went where, by reason.
func reads(s *sqlstore.Store) map[string]int64 {
	out := map[string]int64{}
	for _, r := range s.ReadRoutes() {
		where := "primary"
		if r.Standby {
			where = "standby"
		}
		out[where+"/"+r.Reason] += r.Reads
	}
	return out
}

func TestStandbysServeFreshReadsAndTheirWritersSeeThem(t *testing.T) {
	ctx := context.Background()
	c := storetest.StartCluster(t)
	s := openWithStandbys(t, c, time.Second)

	// An idle primary: both standbys have replayed everything, however long ago it was written.
	time.Sleep(time.Second)
	for _, sb := range s.Standbys() {
		if !sb.Up || sb.Lag > 500*time.Millisecond {
			t.Fatalf("an idle cluster's standby %+v: want up, lagging less than a probe or two", sb)
		}
	}

	u, err := s.CreateUser(ctx, store.NewUser{Name: "ada"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	at, err := s.Position(ctx)
	if err != nil || at == 0 {
		t.Fatalf("Position = %d, %v; want the primary's", at, err)
	}
	// A read that asks for the write's position sees it, wherever it is served.
	for range 50 {
		got, err := s.GetUser(store.WithFreshness(ctx, store.Freshness{After: at}), u.ID)
		if err != nil || got.Name != "ada" {
			t.Fatalf("a read after the write's position: %+v, %v", got, err)
		}
	}
	// Untokened reads, once the standbys are fresh, never touch the primary.
	before := reads(s)
	for range 50 {
		if _, err := s.ListUsers(ctx, store.UserQuery{Limit: 10}); err != nil {
			t.Fatal(err)
		}
	}
	after := reads(s)
	if n := after["standby/fresh"] - before["standby/fresh"]; n != 50 {
		t.Errorf("%d of 50 untokened lists went to a fresh standby; routes %v", n, after)
	}
	if n := after["standby/replayed"]; n == 0 {
		t.Errorf("no read after a position was served by a standby; routes %v", after)
	}
	// A read that asks for the primary gets it.
	if _, err := s.GetUser(store.WithFreshness(ctx, store.Freshness{Primary: true}), u.ID); err != nil {
		t.Fatal(err)
	}
	if n := reads(s)["primary/primary_required"]; n != 1 {
		t.Errorf("primary_required reads = %d, want 1", n)
	}
}

func TestAPausedStandbyIsNeverReadPastItsLagOrBeforeAWrite(t *testing.T) {
	ctx := context.Background()
	c := storetest.StartCluster(t)
	const maxLag = 500 * time.Millisecond
	// The async standby alone, so that every standby read is one from the paused server.
	s := open(t, c.Primary.URL(), sqlstore.WithReadStandbys([]string{c.Async.URL()}, maxLag))
	early, err := s.CreateUser(ctx, store.NewUser{Name: "early"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	c.Async.PauseReplay(t)
	paused := time.Now()

	// Writes go on; every read with the last write's position sees that write, and every read
	// without one sees every write that had returned maxLag (and a probe) before it began.
	type write struct {
		id       int32
		returned time.Time
	}
	var writes []write
	for time.Since(paused) < 3*maxLag {
		u, err := s.CreateUser(ctx, store.NewUser{Name: "w"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		writes = append(writes, write{u.ID, time.Now()})
		at, err := s.Position(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.GetUser(store.WithFreshness(ctx, store.Freshness{After: at}), u.ID); err != nil {
			t.Fatalf("a read after write %d's position: %v", u.ID, err)
		}
		if _, err := s.GetUser(ctx, early.ID); err != nil { // replayed before the pause
			t.Fatal(err)
		}
		began := time.Now()
		for _, w := range writes {
			if began.Sub(w.returned) <= maxLag {
				break
			}
			if _, err := s.GetUser(ctx, w.id); err != nil {
				t.Fatalf("an untokened read %v after paused replay missed user %d, written %v before it: %v",
					time.Since(paused), w.id, began.Sub(w.returned), err)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	routes := reads(s)
	if routes["primary/not_replayed"] == 0 || routes["primary/no_fresh_standby"] == 0 || routes["standby/fresh"] == 0 {
		t.Errorf("routes %v: want reads on the paused standby while it was within its lag, then on the primary", routes)
	}

	// Once it replays again, it serves again.
	c.Async.ResumeReplay(t)
	time.Sleep(500 * time.Millisecond)
	before := reads(s)["standby/fresh"]
	if _, err := s.GetUser(ctx, writes[0].id); err != nil {
		t.Fatal(err)
	}
	if reads(s)["standby/fresh"] != before+1 {
		t.Errorf("a caught-up standby did not serve again; routes %v", reads(s))
	}
}

func TestAStandbyThatIsDownIsPassedOver(t *testing.T) {
	t.Parallel() // a store of its own: see open in sqlite_test.go
	ctx := context.Background()
	c := storetest.StartCluster(t)
	s := openWithStandbys(t, c, time.Second)
	u, err := s.CreateUser(ctx, store.NewUser{Name: "grace"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	c.Async.Stop(t)
	c.Sync.Stop(t)
	// Reads keep working at once: the first to find a standby gone is served by the primary. Both
	// are passed over, reads or not, by the prober's next round (every 200 ms): the 30 s allowed is
	// a hang detector for a standby never passed over, not a bound on the prober's punctuality,
	// which a machine busy compiling something else can spoil (it was a second).
	stopped := time.Now()
	for slices.ContainsFunc(s.Standbys(), func(sb sqlstore.StandbyState) bool { return sb.Up }) {
		if time.Since(stopped) > 30*time.Second {
			t.Fatalf("a standby is still up %v after it stopped: %+v", time.Since(stopped), s.Standbys())
		}
		if _, err := s.GetUser(ctx, u.ID); err != nil {
			t.Fatalf("a read %v after the standbys stopped: %v", time.Since(stopped), err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("both standbys passed over %v after they stopped", time.Since(stopped))
	// The primary serves while none is up.
	if _, err := s.GetUser(ctx, u.ID); err != nil {
		t.Fatal(err)
	}
	c.Async.Start(t)
	deadline := time.Now().Add(30 * time.Second) // a hang detector: the next probe finds it back
	for !s.Standbys()[1].Up {
		if time.Now().After(deadline) {
			t.Fatal("the restarted standby was not used again within 30 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestReadStandbysArePostgresOnly(t *testing.T) {
	_, err := sqlstore.Open(context.Background(), ":memory:", sqlstore.WithReadStandbys([]string{"postgres://x/y"}, time.Second))
	if err == nil || errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("SQLite with read standbys: %v; want a refusal", err)
	}
}

// TestAStandbyPassedOverIsLoggedOnceARun: a standby that fails probe after probe is logged when the
// run begins and when it ends, with how long and how many probes it lasted, never at every probe
// (every 200 ms). A promoted standby (here the primary, named as a standby, which is not in
// recovery) fails every probe for as long as it is named: that once flooded the log.
func TestAStandbyPassedOverIsLoggedOnceARun(t *testing.T) {
	t.Parallel() // a store of its own: see open in sqlite_test.go
	t.Run("a primary named as a standby", func(t *testing.T) {
		dsn := storetest.PostgresSchema(t)
		var logs lockedBuffer
		s := open(t, dsn, sqlstore.WithReadStandbys([]string{dsn}, time.Second), sqlstore.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))))
		defer s.Close()
		time.Sleep(10 * 200 * time.Millisecond) // ten probes
		if n := strings.Count(logs.String(), `"msg":"read standby passed over`); n != 1 {
			t.Fatalf("%d lines of a standby passed over in ten probes, want 1:\n%s", n, logs.String())
		}
	})
	t.Run("a standby stopped and started", func(t *testing.T) {
		c := storetest.StartCluster(t)
		var logs lockedBuffer
		s := open(t, c.Primary.URL(), sqlstore.WithReadStandbys([]string{c.Async.URL()}, time.Second), sqlstore.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))))
		defer s.Close()
		c.Async.Stop(t)
		time.Sleep(10 * 200 * time.Millisecond)
		c.Async.Start(t)
		// Wait for the line of its answering again (not that of its first answer, at the open); the
		// deadline is a hang detector: the next probe finds it back.
		deadline := time.Now().Add(30 * time.Second)
		for !strings.Contains(logs.String(), `"failed_probes"`) {
			if time.Now().After(deadline) {
				t.Fatalf("no line of the standby answering again 30 s after it started:\n%s", logs.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
		if n := strings.Count(logs.String(), `"msg":"read standby passed over`); n != 1 {
			t.Errorf("%d lines of the standby passed over, want 1:\n%s", n, logs.String())
		}
		if !regexp.MustCompile(`"msg":"read standby answers".*"failed_probes":([5-9]|\d\d+)`).MatchString(logs.String()) {
			t.Errorf("the line of the standby answering again does not count the probes it failed (5 or more):\n%s", logs.String())
		}
	})
}
