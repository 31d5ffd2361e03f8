package handlers

import "net/http"

// flushGate lets a stream send a batch of messages with one flush. connect flushes the answer after
// every message it sends, and so does the SSE writer; on HTTP/2 each flush is a DATA frame of its
// own, handed to the connection's goroutine. While the gate is held, those flushes are put off
// until it is released. Only the stream's own goroutine uses it.
type flushGate struct {
	http.ResponseWriter
	held, pending bool
}

func (g *flushGate) Flush() { g.FlushError() }

// FlushError is what http.ResponseController calls, so that a failed flush is not lost.
func (g *flushGate) FlushError() error {
	if g.held {
		g.pending = true
		return nil
	}
	return http.NewResponseController(g.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the connection's own writer, for deadlines.
func (g *flushGate) Unwrap() http.ResponseWriter { return g.ResponseWriter }

// hold puts off flushes until release; a nil gate (a request that is not a stream) does nothing.
func (g *flushGate) hold() {
	if g != nil {
		g.held = true
	}
}

// release flushes what was put off, if anything was.
func (g *flushGate) release() error {
	if g == nil || !g.held {
		return nil
	}
	g.held = false
	if !g.pending {
		return nil
	}
	g.pending = false
	return g.FlushError()
}
