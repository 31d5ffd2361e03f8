package handlers

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"
)

type ctxKey struct{}

func TestLazyDeadlineEndsWorkThatWaitsForIt(t *testing.T) {
	parent := context.WithValue(context.Background(), ctxKey{}, "kept")
	ctx := newLazyDeadline(parent, time.Now().Add(50*time.Millisecond))
	defer ctx.stop()
	if ctx.Value(ctxKey{}) != "kept" {
		t.Errorf("the parent's values are lost")
	}
	if err := ctx.Err(); err != nil {
		t.Fatalf("Err before the deadline: %v", err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done did not close at the deadline")
	}
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Errorf("Err after the deadline: %v, want DeadlineExceeded", ctx.Err())
	}
}

// TestLazyDeadlineErrNeedsNoTimer: past the deadline, Err says so even if nothing waited on Done,
// and a Done asked for afterwards is already closed.
func TestLazyDeadlineErrNeedsNoTimer(t *testing.T) {
	ctx := newLazyDeadline(context.Background(), time.Now().Add(10*time.Millisecond))
	defer ctx.stop()
	time.Sleep(20 * time.Millisecond)
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("Err past the deadline, Done never asked for: %v", ctx.Err())
	}
	if ctx.timed.Load() != nil {
		t.Errorf("Err made the timer")
	}
	select {
	case <-ctx.Done():
	case <-time.After(30 * time.Second): // at once, but a busy machine may take its time
		t.Fatal("Err said the deadline passed, but Done is open")
	}
}

func TestLazyDeadlineReportsTheEarlierDeadline(t *testing.T) {
	own := time.Now().Add(time.Hour)
	ctx := newLazyDeadline(context.Background(), own)
	if d, ok := ctx.Deadline(); !ok || !d.Equal(own) {
		t.Errorf("Deadline %v %v, want its own %v", d, ok, own)
	}
	earlier := time.Now().Add(time.Minute)
	parent, cancel := context.WithDeadline(context.Background(), earlier)
	defer cancel()
	ctx = newLazyDeadline(parent, own)
	if d, ok := ctx.Deadline(); !ok || !d.Equal(earlier) {
		t.Errorf("Deadline %v %v, want the parent's earlier %v (an RPC client's shorter deadline wins)", d, ok, earlier)
	}
}

func TestLazyDeadlineFollowsItsParent(t *testing.T) {
	for _, waitedOn := range []bool{false, true} {
		parent, cancel := context.WithCancel(context.Background())
		ctx := newLazyDeadline(parent, time.Now().Add(time.Hour))
		if waitedOn {
			_ = ctx.Done()
		}
		cancel()
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Second):
			t.Fatalf("waited on %v: cancelling the parent did not end the request's context", waitedOn)
		}
		if !errors.Is(ctx.Err(), context.Canceled) {
			t.Errorf("waited on %v: Err %v, want Canceled", waitedOn, ctx.Err())
		}
		ctx.stop()
	}
}

func TestLazyDeadlineIsCancelledWhenTheRequestEnds(t *testing.T) {
	for _, waitedOn := range []bool{false, true} {
		ctx := newLazyDeadline(context.Background(), time.Now().Add(time.Hour))
		if waitedOn {
			_ = ctx.Done()
		}
		ctx.stop()
		select {
		case <-ctx.Done():
		default:
			t.Fatalf("waited on before the end %v: Done is open after stop", waitedOn)
		}
		if !errors.Is(ctx.Err(), context.Canceled) {
			t.Errorf("waited on before the end %v: Err %v, want Canceled", waitedOn, ctx.Err())
		}
	}
}

// TestLazyDeadlineChildrenNeedNoGoroutine: contexts derived from it (as database/sql and connect
// derive them) follow it through AfterFunc, not through a goroutine each, and end at its deadline.
func TestLazyDeadlineChildrenNeedNoGoroutine(t *testing.T) {
	ctx := newLazyDeadline(context.Background(), time.Now().Add(100*time.Millisecond))
	defer ctx.stop()
	before := runtime.NumGoroutine()
	children := make([]context.Context, 100)
	for i := range children {
		child, cancel := context.WithCancel(ctx)
		defer cancel()
		children[i] = child
	}
	if grown := runtime.NumGoroutine() - before; grown > 10 {
		t.Errorf("100 children started %d goroutines", grown)
	}
	for _, child := range children {
		select {
		case <-child.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("a child did not end at the deadline")
		}
	}
}

func TestLazyDeadlineUnderConcurrentUse(t *testing.T) {
	ctx := newLazyDeadline(context.Background(), time.Now().Add(20*time.Millisecond))
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			if i%2 == 0 {
				for ctx.Err() == nil {
					time.Sleep(time.Millisecond)
				}
			}
			<-ctx.Done()
			if ctx.Err() == nil {
				t.Error("Done closed but Err is nil")
			}
		})
	}
	wg.Wait()
	ctx.stop()
}

// TestWithoutDeadlineKeepsTheValuesAndTheRequestsCancellation: a stream's context has every value
// of the request's, no deadline, and ends when the request does (its client gone), not at the
// request deadline.
func TestWithoutDeadlineKeepsTheValuesAndTheRequestsCancellation(t *testing.T) {
	type key struct{}
	request, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, "request"))
	timed := newLazyDeadline(request, time.Now().Add(time.Millisecond))
	defer timed.stop()
	type later struct{}
	ctx := withoutDeadline(context.WithValue(timed, later{}, "span"))
	if _, ok := ctx.Deadline(); ok {
		t.Fatal("the stream's context has a deadline")
	}
	if ctx.Value(key{}) != "request" || ctx.Value(later{}) != "span" {
		t.Fatal("the stream's context lost a value")
	}
	child, stopChild := context.WithCancel(ctx)
	defer stopChild()
	time.Sleep(20 * time.Millisecond) // past the request deadline
	if ctx.Err() != nil || child.Err() != nil {
		t.Fatalf("the stream's context ended at the request deadline: %v, %v", ctx.Err(), child.Err())
	}
	cancel()
	select {
	case <-child.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a context derived from the stream's did not end when the request did")
	}
	if ctx.Err() != context.Canceled {
		t.Fatalf("the stream's context: %v, want canceled", ctx.Err())
	}
	if plain := context.Background(); withoutDeadline(plain) != plain {
		t.Fatal("a context without a request deadline was changed")
	}
}

// newLazyDeadline returns a deadline of parent outside a request, as withRequestContext makes one
// inside the request's info.
func newLazyDeadline(parent context.Context, deadline time.Time) *lazyDeadline {
	return &lazyDeadline{Context: parent, deadline: deadline}
}
