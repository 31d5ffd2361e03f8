package users

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"connectrpc.com/connect"

	usersv1 "usersd/gen/users/v1"
	"usersd/store"
)

// logStore is a store whose change log is a memoryLog. A watch calls nothing but the change log;
// a call to anything else reaches the nil Store and panics, failing the test.
type logStore struct {
	store.Store
	log *memoryLog
}

func (s logStore) UserEvents(ctx context.Context, after int64, limit int) (store.UserEvents, error) {
	return s.log.UserEvents(ctx, after, limit)
}

func (s logStore) DeleteExpiredUserEvents(ctx context.Context, limit int) (int, error) {
	return s.log.DeleteExpiredUserEvents(ctx, limit)
}

func (s logStore) NotifyUserEvents(wake chan<- struct{}) func() { return s.log.NotifyUserEvents(wake) }

// recordedStream is a WatchStream that keeps every batch it is sent; it fails every send once
// gone is closed.
type recordedStream struct {
	batches chan []*usersv1.UserEvent
	gone    chan struct{}
}

func newRecordedStream() *recordedStream {
	return &recordedStream{batches: make(chan []*usersv1.UserEvent, 1000), gone: make(chan struct{})}
}

func (s *recordedStream) Send(batch []*usersv1.UserEvent) error {
	select {
	case <-s.gone:
		return errors.New("the client is gone")
	default:
	}
	s.batches <- batch
	return nil
}

// next returns the next message sent, within 5 s.
func (s *recordedStream) next(t *testing.T, pending *[]*usersv1.UserEvent) *usersv1.UserEvent {
	t.Helper()
	for len(*pending) == 0 {
		select {
		case batch := <-s.batches:
			*pending = batch
		case <-time.After(5 * time.Second):
			t.Fatal("no message within 5 s")
		}
	}
	m := (*pending)[0]
	*pending = (*pending)[1:]
	return m
}

// watchTest is a service on a change log in memory, with a watch running in the background.
type watchTest struct {
	log     *memoryLog
	service *Service
	metrics *countingMetrics
}

func newWatchTest(t *testing.T, heartbeat time.Duration) *watchTest {
	t.Helper()
	log := newMemoryLog()
	m := newCountingMetrics()
	s, err := New(Options{Store: logStore{log: log}, Logger: slog.New(slog.DiscardHandler), Metrics: m, WatchHeartbeat: heartbeat})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.EndWatches)
	return &watchTest{log: log, service: s, metrics: m}
}

// start runs a watch of req until the test ends; its error arrives on the returned channel.
func (w *watchTest) start(t *testing.T, req *usersv1.WatchUsersRequest) (*recordedStream, <-chan error) {
	stream := newRecordedStream()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	done := make(chan error, 1)
	go func() { done <- w.service.Watch(ctx, req, stream) }()
	return stream, done
}

func after(sequence int64) *int64 { return &sequence }

// sequencesOf reads n changes from stream (heartbeats skipped) and returns their sequences.
func sequencesOf(t *testing.T, stream *recordedStream, pending *[]*usersv1.UserEvent, n int) []int64 {
	t.Helper()
	var got []int64
	for len(got) < n {
		if m := stream.next(t, pending); m.GetKind() != usersv1.UserEvent_KIND_HEARTBEAT {
			got = append(got, m.GetSequence())
		}
	}
	return got
}

func TestAWatchStartsWithAHeartbeatThenCatchesUpAndFollows(t *testing.T) {
	w := newWatchTest(t, time.Minute)
	w.log.create(3)
	stream, _ := w.start(t, &usersv1.WatchUsersRequest{AfterSequence: after(1)})
	var pending []*usersv1.UserEvent
	if first := stream.next(t, &pending); first.GetKind() != usersv1.UserEvent_KIND_HEARTBEAT || first.GetSequence() != 1 {
		t.Fatalf("first message %v, want a heartbeat at the resume point 1", first)
	}
	if got := sequencesOf(t, stream, &pending, 2); got[0] != 2 || got[1] != 3 {
		t.Fatalf("caught up with %v, want [2 3]", got)
	}
	w.log.create(2)
	if got := sequencesOf(t, stream, &pending, 2); got[0] != 4 || got[1] != 5 {
		t.Fatalf("then followed with %v, want [4 5]", got)
	}
}

// TestWatchesCatchingUpFromFarBackTakeTurns: many watches that resume from the start of a long log
// each get every change, in order, while at most catchUpReads of their reads past the first page
// run at once; before the turns, every one of them read at once, and took every connection of the
// store's pool from the lists.
func TestWatchesCatchingUpFromFarBackTakeTurns(t *testing.T) {
	w := newWatchTest(t, time.Minute)
	const pages, watches = 5, 20
	w.log.create(pages * feedBatch)
	w.log.readTime = time.Millisecond
	w.log.peakOf = func(after int64) bool { return after > 0 && after < pages*feedBatch } // the pages after the first
	streams := make([]*recordedStream, watches)
	for i := range streams {
		streams[i], _ = w.start(t, &usersv1.WatchUsersRequest{AfterSequence: after(0)})
	}
	for i, stream := range streams {
		var pending []*usersv1.UserEvent
		got := sequencesOf(t, stream, &pending, pages*feedBatch)
		for j, sequence := range got {
			if sequence != int64(j+1) {
				t.Fatalf("watch %d: change %d has sequence %d; want every change in order", i, j, sequence)
			}
		}
	}
	if peak := w.log.peak.Load(); peak > catchUpReads || peak == 0 {
		t.Fatalf("%d reads of catching-up watches ran at once; want at most %d", peak, catchUpReads)
	}
}

func TestAWatchFromNowStartsAtTheNewestChange(t *testing.T) {
	w := newWatchTest(t, time.Minute)
	w.log.create(7)
	stream, _ := w.start(t, &usersv1.WatchUsersRequest{})
	var pending []*usersv1.UserEvent
	if first := stream.next(t, &pending); first.GetSequence() != 7 {
		t.Fatalf("first message %v, want a heartbeat at 7", first)
	}
	w.log.create(1)
	if got := sequencesOf(t, stream, &pending, 1); got[0] != 8 {
		t.Fatalf("got %v, want [8]", got)
	}
}

func TestAWatchRefusesAResumePointTheLogCannotServe(t *testing.T) {
	for _, c := range []struct {
		name    string
		prepare func(*memoryLog)
		after   int64
	}{
		{"ahead of the log", func(l *memoryLog) { l.create(3) }, 4},
		{"swept from the log", func(l *memoryLog) { l.create(5); l.sweep(3) }, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWatchTest(t, time.Minute)
			c.prepare(w.log)
			stream, done := w.start(t, &usersv1.WatchUsersRequest{AfterSequence: after(c.after)})
			var err error
			select {
			case err = <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("the watch did not end within 5 s")
			}
			var e *Error
			if !errors.As(err, &e) || e.Code() != connect.CodeFailedPrecondition || e.Reason() != ReasonChangesNotKept {
				t.Fatalf("ended with %v, want failed_precondition with reason %s", err, ReasonChangesNotKept)
			}
			if len(stream.batches) != 0 {
				t.Errorf("%d batches were sent before the refusal; want none, so that the refusal is the answer", len(stream.batches))
			}
			if open := w.metrics.watchers(); open != 0 {
				t.Errorf("%d watchers counted open after the refusal", open)
			}
		})
	}
}

func TestAWatchRefusesABadRequestBeforeJoining(t *testing.T) {
	w := newWatchTest(t, time.Minute)
	for name, req := range map[string]*usersv1.WatchUsersRequest{
		"a negative resume point":     {AfterSequence: after(-1)},
		"a role with a line break":    {Role: "a\nb"},
		"a role longer than the rule": {Role: string(make([]byte, maxRoleLength+1))},
	} {
		err := w.service.Watch(t.Context(), req, newRecordedStream())
		if connectCode(err) != connect.CodeInvalidArgument {
			t.Errorf("%s: %v, want invalid_argument", name, err)
		}
	}
}

func TestAWatchOfARoleSeesOnlyThatRolesChanges(t *testing.T) {
	w := newWatchTest(t, time.Minute)
	stream, _ := w.start(t, &usersv1.WatchUsersRequest{Role: "admin"})
	var pending []*usersv1.UserEvent
	stream.next(t, &pending) // the first heartbeat
	w.log.write(store.EventCreated, 1, "guest")
	admin := w.log.write(store.EventCreated, 2, "admin")
	w.log.write(store.EventCreated, 3, "")
	last := w.log.write(store.EventUpdated, 2, "admin")
	if got := sequencesOf(t, stream, &pending, 2); got[0] != admin || got[1] != last {
		t.Fatalf("got %v, want the admin's changes [%d %d]", got, admin, last)
	}
}

func TestASilentWatchSendsHeartbeatsAtItsPosition(t *testing.T) {
	w := newWatchTest(t, 20*time.Millisecond)
	w.log.create(2)
	stream, _ := w.start(t, &usersv1.WatchUsersRequest{Role: "nobody has it"})
	var pending []*usersv1.UserEvent
	stream.next(t, &pending)
	w.log.create(1) // filtered out, yet the position moves past it
	deadline := time.Now().Add(5 * time.Second)
	for {
		m := stream.next(t, &pending)
		if m.GetKind() != usersv1.UserEvent_KIND_HEARTBEAT {
			t.Fatalf("got %v, want only heartbeats", m)
		}
		if m.GetSequence() == 3 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("heartbeats stayed at %d, want them to reach 3", m.GetSequence())
		}
	}
}

func TestEndWatchesEndsEveryWatchWithUnavailable(t *testing.T) {
	w := newWatchTest(t, time.Minute)
	stream, done := w.start(t, &usersv1.WatchUsersRequest{})
	var pending []*usersv1.UserEvent
	stream.next(t, &pending)
	waitFor(t, func() bool { return w.service.feed.listening() == 1 })
	w.service.EndWatches()
	if err := <-done; connectCode(err) != connect.CodeUnavailable {
		t.Fatalf("the watch ended with %v, want unavailable, so that its client resumes elsewhere", err)
	}
	if err := w.service.Watch(t.Context(), &usersv1.WatchUsersRequest{}, newRecordedStream()); connectCode(err) != connect.CodeUnavailable {
		t.Fatalf("a watch after EndWatches: %v, want unavailable", err)
	}
}

func TestAWatchWhoseClientIsGoneEndsCanceled(t *testing.T) {
	w := newWatchTest(t, time.Minute)
	stream, done := w.start(t, &usersv1.WatchUsersRequest{})
	var pending []*usersv1.UserEvent
	stream.next(t, &pending)
	waitFor(t, func() bool { return w.service.feed.listening() == 1 })
	close(stream.gone)
	w.log.create(1)
	if err := <-done; connectCode(err) != connect.CodeCanceled {
		t.Fatalf("the watch ended with %v, want canceled: nobody is there, and it is no fault", err)
	}
	waitFor(t, func() bool { return w.metrics.watchers() == 0 })
}

// connectCode is the RPC code a client gets for err.
func connectCode(err error) connect.Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code()
	}
	return connect.CodeOf(err)
}

// waitFor waits up to 5 s for cond.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("the condition did not hold within 5 s")
		}
		time.Sleep(time.Millisecond)
	}
}
