package users

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"connectrpc.com/connect"

	"usersd/store"
)

// newTestFeed returns a feed of log with a limit of maxWatchers, closed when the test ends.
func newTestFeed(t *testing.T, log *memoryLog, maxWatchers int) (*feed, *countingMetrics) {
	t.Helper()
	m := newCountingMetrics()
	f := newFeed(log, slog.New(slog.DiscardHandler), m, maxWatchers)
	t.Cleanup(func() { f.close(errServerStopping) })
	return f, m
}

// listening joins a watcher and makes it listen, failing the test if either is refused.
func listening(t *testing.T, f *feed) *watcher {
	t.Helper()
	w, err := f.join()
	if err != nil {
		t.Fatalf("join: %v", err)
	}
	if err := f.listen(t.Context(), w); err != nil {
		t.Fatalf("listen: %v", err)
	}
	return w
}

// endedWith waits until the feed ends w, and checks why.
func endedWith(t *testing.T, w *watcher, want error) {
	t.Helper()
	select {
	case <-w.ended():
	case <-time.After(5 * time.Second):
		t.Fatalf("the watcher was not ended within 5 s; want it ended with %v", want)
	}
	if w.err() != want {
		t.Fatalf("the watcher was ended with %v, want %v", w.err(), want)
	}
}

// drain takes what the feed hands w until it holds through sequences, and returns them in order.
func drain(t *testing.T, w *watcher, through int64) []int64 {
	t.Helper()
	var got []int64
	deadline := time.After(30 * time.Second) // a hang detector, not a bound on speed
	for len(got) == 0 || got[len(got)-1] < through {
		select {
		case <-w.ready():
		case <-w.ended():
			t.Fatalf("the watcher was ended with %v after %d changes", w.err(), len(got))
		case <-deadline:
			t.Fatalf("got %d changes within 30 s, want them through %d", len(got), through)
		}
		for _, batch := range w.take() {
			for _, c := range batch {
				got = append(got, c.Sequence)
			}
			w.release(len(batch))
		}
	}
	return got
}

func TestTheFeedRefusesWatchersPastItsLimit(t *testing.T) {
	f, m := newTestFeed(t, newMemoryLog(), 2)
	first, err := f.join()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.join(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.join(); err != errTooManyWatchers {
		t.Fatalf("a third watcher: %v, want %v", err, errTooManyWatchers)
	}
	if code := errTooManyWatchers.Code(); code != connect.CodeResourceExhausted {
		t.Errorf("a watcher past the limit is refused with %v, want resource_exhausted", code)
	}
	if got := m.cuts("too_many"); got != 1 {
		t.Errorf("too_many counted %d times, want 1", got)
	}
	f.leave(first)
	if _, err := f.join(); err != nil {
		t.Fatalf("a watcher after one left: %v", err)
	}
	if got := m.watchers(); got != 2 {
		t.Errorf("%d watchers counted open, want 2", got)
	}
}

func TestTheFeedHandsEveryChangeToEveryListenerInOrder(t *testing.T) {
	log := newMemoryLog()
	log.create(3) // before anyone listens: the feed starts where the log is
	f, _ := newTestFeed(t, log, 10)
	a, b := listening(t, f), listening(t, f)
	log.create(1200) // more than one read's batch
	for name, w := range map[string]*watcher{"a": a, "b": b} {
		got := drain(t, w, 1203)
		if len(got) != 1200 || got[0] != 4 {
			t.Fatalf("watcher %s got %d changes from %v, want 1200 from 4", name, len(got), got[:min(len(got), 3)])
		}
		for i := 1; i < len(got); i++ {
			if got[i] != got[i-1]+1 {
				t.Fatalf("watcher %s got %d after %d", name, got[i], got[i-1])
			}
		}
	}
}

func TestTheFeedEndsAWatcherTooSlowInsteadOfBufferingForIt(t *testing.T) {
	log := newMemoryLog()
	f, m := newTestFeed(t, log, 10)
	slow, reading := listening(t, f), listening(t, f)
	// A whole backlog reaches both, whether they read or not.
	log.create(watcherBacklog)
	if got := drain(t, reading, watcherBacklog); len(got) != watcherBacklog {
		t.Fatalf("the reading watcher got %d changes, want %d", len(got), watcherBacklog)
	}
	select {
	case <-slow.ended():
		t.Fatalf("a watcher with a backlog of exactly %d was ended: %v", watcherBacklog, slow.err())
	default:
	}
	// One batch more ends the one that did not read, and only that one.
	log.create(feedBatch)
	endedWith(t, slow, errWatcherTooSlow)
	if got := drain(t, reading, watcherBacklog+feedBatch); len(got) != feedBatch {
		t.Fatalf("the reading watcher then got %d changes, want %d", len(got), feedBatch)
	}
	if got := m.cuts("too_slow"); got != 1 {
		t.Errorf("too_slow counted %d times, want 1", got)
	}
}

func TestTheFeedEndsEveryWatcherWhenTheLogIsSweptPastIt(t *testing.T) {
	log := newMemoryLog()
	log.create(5)
	f, _ := newTestFeed(t, log, 10)
	a, b := listening(t, f), listening(t, f)
	log.add(10) // the notices were lost, and the changes expired before the next read
	log.sweep(15)
	log.wake()
	endedWith(t, a, errFeedLost)
	endedWith(t, b, errFeedLost)
	if code := errFeedLost.Code(); code != connect.CodeUnavailable {
		t.Errorf("a feed that lost its place ends its watchers with %v, want unavailable: they resume elsewhere", code)
	}
}

func TestTheFeedReadsAgainAfterAFailedRead(t *testing.T) {
	log := newMemoryLog()
	f, _ := newTestFeed(t, log, 10)
	w := listening(t, f)
	log.failReads(store.ErrUnavailable)
	failed := log.reads.Load()
	log.create(3)
	deadline := time.Now().Add(5 * time.Second)
	for log.reads.Load() == failed && time.Now().Before(deadline) { // until a read has failed
		time.Sleep(time.Millisecond)
	}
	log.failReads(nil)
	log.wake()
	if got := drain(t, w, 3); len(got) != 3 {
		t.Fatalf("after the database came back the watcher got %v, want the 3 changes", got)
	}
}

func TestTheFeedFindsChangesWithoutANotice(t *testing.T) {
	log := newMemoryLog()
	f, _ := newTestFeed(t, log, 10)
	w := listening(t, f)
	log.add(2) // the notice was lost: only a poll finds them
	start := time.Now()
	drain(t, w, 2)
	// A poll comes every feedPollEvery; ten of them is a bound that only a feed that stopped
	// polling misses, however busy the machine.
	if took := time.Since(start); took > 10*feedPollEvery {
		t.Errorf("changes without a notice arrived after %v; the feed polls every %v", took, feedPollEvery)
	}
}

func TestClosingTheFeedEndsEveryWatcherAndRefusesNewOnes(t *testing.T) {
	f, m := newTestFeed(t, newMemoryLog(), 10)
	a, b := listening(t, f), listening(t, f)
	f.close(errServerStopping)
	endedWith(t, a, errServerStopping)
	endedWith(t, b, errServerStopping)
	if _, err := f.join(); !errors.Is(err, errServerStopping) {
		t.Fatalf("join after close: %v, want %v", err, errServerStopping)
	}
	if got := m.cuts("stopping"); got != 2 {
		t.Errorf("stopping counted %d times, want 2", got)
	}
}

func TestTheFeedStopsFollowingTheLogWhenNobodyListens(t *testing.T) {
	log := newMemoryLog()
	f, _ := newTestFeed(t, log, 10)
	w := listening(t, f)
	f.leave(w)
	before := log.reads.Load()
	log.create(5)
	time.Sleep(50 * time.Millisecond)
	if after := log.reads.Load(); after != before {
		t.Errorf("the feed read the log %d times for nobody", after-before)
	}
	// The next listener starts where the log is then: it is handed only what comes after.
	w = listening(t, f)
	log.create(1)
	if got := drain(t, w, 6); len(got) != 1 || got[0] != 6 {
		t.Fatalf("a new listener got %v, want only [6]", got)
	}
}

// listening reports how many watchers receive what the feed reads.
func (f *feed) listening() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.listeners)
}
