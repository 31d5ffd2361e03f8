// Health: one decision, whether the store answers, asked by /health and by gRPC health checking.
package handlers

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

// errHealthWatchesEnded ends every gRPC health watch when the server stops.
var errHealthWatchesEnded = users.NewError(connect.CodeUnavailable, users.ReasonNone, "the server is stopping")

// storeHealth reports the process ("") and the Users service as healthy while the store answers and
// the process is not draining for shutdown.
type storeHealth struct {
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

// servedServices are the services whose health is asked by name, beside "" for the process.
var servedServices = []string{"", usersv1connect.UsersName}

// serving reports whether the process takes new requests and the store answers within healthTimeout.
func (h *storeHealth) serving(ctx context.Context) bool { return h.notReady(ctx) == "" }

// notReady says why the process should not be sent new requests, or "" when it should: it is
// draining, or the store does not answer (or takes no writes) within healthTimeout. The words are
// for clients: the store's own error is not among them.
func (h *storeHealth) notReady(ctx context.Context) string {
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
func (h *storeHealth) watchedServing() bool {
	if h.draining.Load() {
		return false
	}
	h.watchedMu.Lock()
	defer h.watchedMu.Unlock()
	if h.watchedAt.IsZero() || time.Since(h.watchedAt) >= healthWatchPoll {
		h.watchedOK, h.watchedAt = h.serving(context.Background()), time.Now()
	}
	return h.watchedOK
}

// drain makes the process not serving from now on, and tells the watches at once.
func (h *storeHealth) drain() {
	h.draining.Store(true)
	h.closeChannel(func() chan struct{} { return h.drained })
}

// endWatches ends every health watch, and those that start after.
func (h *storeHealth) endWatches() { h.closeChannel(func() chan struct{} { return h.ended }) }

// changes returns the channels that are closed when draining starts and when the watches end.
func (h *storeHealth) changes() (drained, ended <-chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.makeChannels()
	return h.drained, h.ended
}

// closeChannel closes the channel that which picks, unless it is closed already.
func (h *storeHealth) closeChannel(which func() chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.makeChannels()
	select {
	case <-which():
	default:
		close(which())
	}
}

func (h *storeHealth) makeChannels() {
	if h.drained == nil {
		h.drained, h.ended = make(chan struct{}), make(chan struct{})
	}
}
