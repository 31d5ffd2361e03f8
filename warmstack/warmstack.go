// Package warmstack serves HTTP/2 requests on goroutines whose stacks have already grown.
//
// net/http's HTTP/2 server runs every stream's handler on a new goroutine, which starts with the
// runtime's smallest stack. A request through usersd's middleware, connect-go and the store needs
// several times that, so each stream grew its stack by copying it, again and again, every request:
// the copies (runtime.newstack, and the frame tables each copy walks) were the largest cost of a
// gRPC call. An HTTP/1.1 connection keeps one goroutine for all its requests, whose stack grows
// once. Here an HTTP/2 request is handed to a worker goroutine that lives on after it, so its grown
// stack serves the next request too; the stream's goroutine waits for it, on its small stack.
//
// Whether this pays is measured in docs/PERFORMANCE.md#device-warmstack.
package warmstack

import (
	"fmt"
	"net/http"
	"runtime/debug"
	"sync/atomic"
	"time"
)

// idleTimeout is how long a worker waits for its next request before it ends, so that a burst of
// streams does not leave its workers, and their stacks, behind for good.
const idleTimeout = 2 * time.Second

// job is one request handed to a worker, and where the worker says it is done: nil, or what the
// handler panicked with.
type job struct {
	w    http.ResponseWriter
	r    *http.Request
	done chan any
}

// handler hands HTTP/2 requests to its workers.
type handler struct {
	next       http.Handler
	lasting    func(*http.Request) bool
	jobs       chan job
	workers    atomic.Int32
	maxWorkers int32
	idle       time.Duration // idleTimeout; shorter in tests
}

// Handler returns next with each HTTP/2 request served on one of at most maxWorkers long-lived
// goroutines; a request that finds none idle, and none left to start, is served where it came, as
// it would be without this. HTTP/1 requests always are: their connection's goroutine lives on. So
// are the requests lasting reports (nil: none), whose answers last as long as their clients
// watch: each would hold a worker for as long, and enough of them would hold every worker.
func Handler(next http.Handler, maxWorkers int, lasting func(*http.Request) bool) http.Handler {
	if lasting == nil {
		lasting = func(*http.Request) bool { return false }
	}
	return &handler{next: next, lasting: lasting, jobs: make(chan job), maxWorkers: int32(maxWorkers), idle: idleTimeout}
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor != 2 || h.lasting(r) {
		h.next.ServeHTTP(w, r)
		return
	}
	j := job{w: w, r: r, done: make(chan any, 1)}
	select {
	case h.jobs <- j:
	default:
		if !h.startWorker(j) {
			h.next.ServeHTTP(w, r)
			return
		}
	}
	// The handler's panic goes on in the stream's goroutine, where net/http expects it (it closes
	// the stream on http.ErrAbortHandler, and logs anything else).
	if p := <-j.done; p != nil {
		panic(p)
	}
}

// startWorker starts a worker with j as its first job, unless maxWorkers already run.
func (h *handler) startWorker(j job) bool {
	for {
		n := h.workers.Load()
		if n >= h.maxWorkers {
			return false
		}
		if h.workers.CompareAndSwap(n, n+1) {
			go h.work(j)
			return true
		}
	}
}

// work serves j, then every job handed to it, until none comes for h.idle.
func (h *handler) work(j job) {
	defer h.workers.Add(-1)
	idle := time.NewTimer(h.idle)
	defer idle.Stop()
	for {
		h.serve(j)
		j = job{} // an idle worker holds no request alive
		idle.Reset(h.idle)
		select {
		case j = <-h.jobs:
		case <-idle.C:
			return
		}
	}
}

// serve runs the handler for j and then tells j's caller that it is done, with what the handler
// panicked with, if anything; it tells it too when the handler ends the goroutine with
// runtime.Goexit (the worker then ends with it). A panic other than http.ErrAbortHandler carries
// the worker's stack, where the handler was, since net/http logs the stream goroutine's.
func (h *handler) serve(j job) {
	defer func() {
		p := recover()
		if p != nil && p != http.ErrAbortHandler {
			p = fmt.Sprintf("%v\n\non a warmstack worker:\n%s", p, debug.Stack())
		}
		j.done <- p
	}()
	h.next.ServeHTTP(j.w, j.r)
}
