// The deadline of a request's work, with its timer started only when something waits for it.
// context.WithTimeout on every request makes a timer and takes a place in the parent's list of
// children, and most reads, served from memory, never wait on anything. Measured against
// context.WithTimeout in docs/PERFORMANCE.md#device-lazy-deadline; it stays because it pays there.
package handlers

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// lazyDeadline is context.WithDeadline(parent, deadline), made on the first call that needs the
// timer: Done, or AfterFunc (which context.WithCancel and friends use to follow a parent). Deadline,
// Err and Value need no timer. After stop it is cancelled, as WithDeadline's context is after its
// cancel function is called. One difference remains: context.Cause of this context itself gives
// its parent's cause (Cause finds the parent's cancelCtx through Value); contexts derived from it
// get DeadlineExceeded as their cause, as they would from WithDeadline. Nothing on a request's path
// (database/sql, pgx, modernc's sqlite, connect-go) asks Cause of it.
type lazyDeadline struct {
	context.Context // the parent: values and cancellation come from it
	deadline        time.Time
	// info, when set, is the value of requestInfoKey: the request's info, which holds this
	// context (see withRequestContext).
	info *requestInfo

	mu    sync.Mutex
	timed atomic.Pointer[timedContext] // set once, under mu
}

type timedContext struct {
	context.Context
	cancel context.CancelFunc
}

// lazyDeadlineKey finds the request's lazyDeadline among the values of a context derived from it.
type lazyDeadlineKey struct{}

func (c *lazyDeadline) Value(key any) any {
	switch key.(type) {
	case lazyDeadlineKey:
		return c
	case requestInfoKey:
		if c.info != nil {
			return c.info
		}
	}
	return c.Context.Value(key)
}

// withoutDeadline returns ctx without the request deadline that withRequestContext gave it: every
// value of ctx, and the cancellation of the request itself (its client gone, the server stopped),
// but not the deadline. A stream, which lasts as long as its client watches, is served with it.
func withoutDeadline(ctx context.Context) context.Context {
	d, ok := ctx.Value(lazyDeadlineKey{}).(*lazyDeadline)
	if !ok {
		return ctx
	}
	return untimed{Context: ctx, request: d.Context}
}

// untimed is a context's values with another context's cancellation: the request's, before its
// deadline.
type untimed struct {
	context.Context                 // the values
	request         context.Context // the cancellation
}

func (u untimed) Deadline() (time.Time, bool) { return u.request.Deadline() }
func (u untimed) Done() <-chan struct{}       { return u.request.Done() }
func (u untimed) Err() error                  { return u.request.Err() }

// started returns the context that carries the timer, making it on first use.
func (c *lazyDeadline) started() *timedContext {
	if t := c.timed.Load(); t != nil {
		return t
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if t := c.timed.Load(); t != nil {
		return t
	}
	ctx, cancel := context.WithDeadline(c.Context, c.deadline)
	t := &timedContext{ctx, cancel}
	c.timed.Store(t)
	return t
}

// stop ends the context's life: its timer, if it was made, stops, and it reads as cancelled from
// now on.
func (c *lazyDeadline) stop() {
	c.mu.Lock()
	if c.timed.Load() == nil {
		c.timed.Store(endedBeforeUse) // no timer to stop: read as cancelled from now on
	}
	c.mu.Unlock()
	c.timed.Load().cancel()
}

// endedBeforeUse stands for the timer of every request that ended without waiting on its context:
// a context cancelled once, shared, so that ending such a request costs nothing. Its values never
// show: lazyDeadline answers Value from its parent.
var endedBeforeUse = func() *timedContext {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return &timedContext{ctx, cancel}
}()

func (c *lazyDeadline) Deadline() (time.Time, bool) {
	if parent, ok := c.Context.Deadline(); ok && parent.Before(c.deadline) {
		return parent, true
	}
	return c.deadline, true
}

func (c *lazyDeadline) Done() <-chan struct{} { return c.started().Done() }

// Err answers without the timer when it has not been made: the parent's error, or
// DeadlineExceeded once the deadline has passed (a Done asked for later is then closed at once).
func (c *lazyDeadline) Err() error {
	if t := c.timed.Load(); t != nil {
		return t.Err()
	}
	if err := c.Context.Err(); err != nil {
		return err
	}
	if !time.Now().Before(c.deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

// AfterFunc lets a context derived from this one follow it without a goroutine of its own
// (context.WithCancel looks for this method on a parent it does not know). It is only a saving:
// without it, a derived context would still follow this one, through a goroutine that waits on
// Done, so a change in the context package's internals cannot make it wrong.
func (c *lazyDeadline) AfterFunc(f func()) func() bool { return context.AfterFunc(c.started(), f) }

func (c *lazyDeadline) String() string { return "handlers.lazyDeadline" }
