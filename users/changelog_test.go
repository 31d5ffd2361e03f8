package users

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"usersd/store"
)

// memoryLog is a change log in memory that keeps store.ChangeLog's contract (which the conformance
// suite in store/storetest holds the real stores to): the feed's and the watches' tests drive it
// where a database could not be made to, such as a sweep past a feed's position, or a read that
// fails.
type memoryLog struct {
	mu     sync.Mutex
	events []store.UserEvent
	swept  int64 // every change up to this sequence is gone
	latest int64
	fail   error // when set, every read fails with it
	wakes  map[int]chan<- struct{}
	nextID int
	reads  atomic.Int64
	// readTime, when set, is how long every read takes, outside the lock, so that reads overlap;
	// inFlight counts the reads under way, and peak the most at once of those that matched peakOf.
	readTime time.Duration
	peakOf   func(after int64) bool
	inFlight atomic.Int64
	peak     atomic.Int64
}

func newMemoryLog() *memoryLog { return &memoryLog{wakes: map[int]chan<- struct{}{}} }

func (l *memoryLog) UserEvents(ctx context.Context, after int64, limit int) (store.UserEvents, error) {
	l.reads.Add(1)
	if l.readTime > 0 && l.peakOf(after) {
		n := l.inFlight.Add(1)
		defer l.inFlight.Add(-1)
		for peak := l.peak.Load(); n > peak && !l.peak.CompareAndSwap(peak, n); peak = l.peak.Load() {
		}
		time.Sleep(l.readTime)
	}
	if err := ctx.Err(); err != nil {
		return store.UserEvents{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fail != nil {
		return store.UserEvents{}, l.fail
	}
	out := store.UserEvents{Latest: l.latest}
	switch {
	case after < 0:
		return out, nil
	case after < l.swept:
		return store.UserEvents{}, fmt.Errorf("resume after %d, swept through %d: %w", after, l.swept, store.ErrEventsSwept)
	case after > l.latest:
		return store.UserEvents{}, fmt.Errorf("resume after %d, newest %d: %w", after, l.latest, store.ErrEventsAhead)
	}
	for _, e := range l.events {
		if e.Sequence > after && len(out.Events) < limit {
			out.Events = append(out.Events, e)
		}
	}
	return out, nil
}

func (l *memoryLog) DeleteExpiredUserEvents(context.Context, int) (int, error) { return 0, nil }

func (l *memoryLog) NotifyUserEvents(wake chan<- struct{}) func() {
	l.mu.Lock()
	defer l.mu.Unlock()
	id := l.nextID
	l.nextID++
	l.wakes[id] = wake
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		delete(l.wakes, id)
	}
}

// write appends one change of user id with role, and wakes the readers; it returns its sequence.
func (l *memoryLog) write(kind store.EventKind, id int32, role string) int64 {
	l.mu.Lock()
	l.latest++
	l.events = append(l.events, store.UserEvent{Sequence: l.latest, Kind: kind,
		User: store.User{ID: id, Name: fmt.Sprintf("user %d", id), Role: role, Version: 1}})
	latest := l.latest
	l.mu.Unlock()
	l.wake()
	return latest
}

// create appends n creates, of users numbered as their sequences, and wakes the readers once.
func (l *memoryLog) create(n int) {
	l.add(n)
	l.wake()
}

// add appends n creates like create, without waking anyone: a notice that was lost.
func (l *memoryLog) add(n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for range n {
		l.latest++
		l.events = append(l.events, store.UserEvent{Sequence: l.latest, Kind: store.EventCreated,
			User: store.User{ID: int32(l.latest), Name: fmt.Sprintf("user %d", l.latest), Version: 1}})
	}
}

// sweep deletes every change up to through, as the sweeper does with expired ones.
func (l *memoryLog) sweep(through int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	kept := l.events[:0]
	for _, e := range l.events {
		if e.Sequence > through {
			kept = append(kept, e)
		}
	}
	l.events, l.swept = kept, max(l.swept, through)
}

func (l *memoryLog) wake() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, w := range l.wakes {
		select {
		case w <- struct{}{}:
		default:
		}
	}
}

// failReads makes every read fail with err from now on; nil makes them work again.
func (l *memoryLog) failReads(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fail = err
}

// countingMetrics counts what the service reports, for the tests.
type countingMetrics struct {
	mu      sync.Mutex
	open    int
	sent    int
	cut     map[string]int
	replays int
	refused map[string]int
}

func newCountingMetrics() *countingMetrics {
	return &countingMetrics{cut: map[string]int{}, refused: map[string]int{}}
}

func (m *countingMetrics) IdempotentReplay()                   { m.do(func() { m.replays++ }) }
func (m *countingMetrics) IdempotencyKeyRefused(reason string) { m.do(func() { m.refused[reason]++ }) }
func (m *countingMetrics) WatchStarted()                       { m.do(func() { m.open++ }) }
func (m *countingMetrics) WatchEnded()                         { m.do(func() { m.open-- }) }
func (m *countingMetrics) EventsSent(n int)                    { m.do(func() { m.sent += n }) }
func (m *countingMetrics) WatchCut(reason string)              { m.do(func() { m.cut[reason]++ }) }

func (m *countingMetrics) do(f func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f()
}

func (m *countingMetrics) watchers() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.open
}

func (m *countingMetrics) cuts(reason string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cut[reason]
}
