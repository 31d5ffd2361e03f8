// Package health is whether this process should be sent requests: one decision, that the store
// answers and the process is not draining, asked by the REST probes and served as gRPC health
// checking (grpc.health.v1.Health) on every RPC protocol.
package health

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"usersd/gen/users/v1/usersv1connect"
	"usersd/store"
	"usersd/users"

	"connectrpc.com/connect"
)

// healthTimeout bounds the store ping of a health check, so a hung database reads as unhealthy
// instead of hanging the load balancer's probe.
const healthTimeout = 2 * time.Second

// errWatchesEnded ends every gRPC health watch when the server stops.
var errWatchesEnded = users.NewError(connect.CodeUnavailable, users.ReasonNone, "the server is stopping")

// Checker reports the process ("") and the Users service as healthy while the store answers and
// the process is not draining for shutdown.
type Checker struct {
	store    store.Store
	draining atomic.Bool

	mu sync.Mutex
	// drained is closed when draining starts, ended when the watches end; both are made on first
	// use, so that the zero value works.
	drained, ended chan struct{}

	// The health watches' one answer (see watchedServing), under watchedMu: whether the process
	// served when it was last asked, and when that was.
	watchedMu sync.Mutex
	watchedOK bool
	watchedAt time.Time
}

// New returns the checker of a process that serves from st.
func New(st store.Store) *Checker { return &Checker{store: st} }

// servedServices are the services whose health is asked by name, beside "" for the process.
var servedServices = []string{"", usersv1connect.UsersName}

// Serving reports whether the process takes new requests and the store answers within healthTimeout.
func (h *Checker) Serving(ctx context.Context) bool { return h.NotReady(ctx) == "" }

// NotReady says why the process should not be sent new requests, or "" when it should: it is
// draining, or the store does not answer (or takes no writes) within healthTimeout. The words are
// for clients: the store's own error is not among them.
func (h *Checker) NotReady(ctx context.Context) string {
	if h.draining.Load() {
		return "the server is stopping"
	}
	ctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	if h.store.Ping(ctx) != nil {
		return "the database does not answer, or takes no writes"
	}
	return ""
}

// watchedServing is serving for the health watches: every watch of a poll period gets the answer of
// one ping, so that the store is asked as often with ten thousand watches open as with one. A
// watch is public and lasts, so the pings of one each would grow with what anyone opens, and a
// store busy answering them would read as down to every probe.
func (h *Checker) watchedServing() bool {
	if h.draining.Load() {
		return false
	}
	h.watchedMu.Lock()
	defer h.watchedMu.Unlock()
	if h.watchedAt.IsZero() || time.Since(h.watchedAt) >= watchPoll {
		h.watchedOK, h.watchedAt = h.Serving(context.Background()), time.Now()
	}
	return h.watchedOK
}

// Drain makes the process not serving from now on, and tells the watches at once.
func (h *Checker) Drain() {
	h.draining.Store(true)
	h.closeChannel(func() chan struct{} { return h.drained })
}

// EndWatches ends every health watch, and those that start after.
func (h *Checker) EndWatches() { h.closeChannel(func() chan struct{} { return h.ended }) }

// changes returns the channels that are closed when draining starts and when the watches end.
func (h *Checker) changes() (drained, ended <-chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.makeChannels()
	return h.drained, h.ended
}

// closeChannel closes the channel that which picks, unless it is closed already.
func (h *Checker) closeChannel(which func() chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.makeChannels()
	select {
	case <-which():
	default:
		close(which())
	}
}

func (h *Checker) makeChannels() {
	if h.drained == nil {
		h.drained, h.ended = make(chan struct{}), make(chan struct{})
	}
}
