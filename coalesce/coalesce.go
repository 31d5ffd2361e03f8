// Package coalesce batches the writes of HTTP/2 connections. net/http's HTTP/2 server writes each
// frame of a call (HEADERS, DATA, trailers) as its own write(2) and flushes whenever its queue runs
// empty, so with many streams on a connection most of a call's system calls are writes. Here the
// writes of an HTTP/2 connection go to a buffer that a flusher goroutine writes out after yielding
// once, so that frames that concurrent streams are about to write leave in the same system call.
//
// Only HTTP/2 connections are batched: one HTTP/1.1 request writes its answer in one call already,
// and the flusher's hop would only add to it. An idle connection holds neither a goroutine nor a
// buffer of this package: the flusher runs only while bytes are pending, and its buffer comes
// from a pool and goes back to it. Whether this pays, and where, is measured in docs/PERFORMANCE.md#device-coalesce.
package coalesce

import (
	"bytes"
	"errors"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// maxPending bounds what a connection holds unwritten; a writer past it waits for the flusher,
	// so a client that does not read slows its own streams down instead of growing memory.
	maxPending = 256 << 10
	// pooledBufferLimit is the largest buffer put back in the pool: a rare large batch is left to
	// the collector instead of being kept for every later one.
	pooledBufferLimit = 64 << 10
	// closeDrainLimit bounds how long Close waits for pending bytes to reach a client.
	closeDrainLimit = time.Second
)

// http2Preface is what every HTTP/2 client sends first (RFC 9113, section 3.4).
var http2Preface = []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")

// Listener returns l with HTTP/2 connections batched, known by the preface they send first.
func Listener(l net.Listener) net.Listener { return listener{l} }

type listener struct{ net.Listener }

func (l listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return newConn(c), nil
}

// The states of a connection, decided by its first bytes.
const (
	undecided int32 = iota // fewer bytes than the preface read, all of them the preface's
	direct                 // not HTTP/2: writes go straight to the connection
	batched                // HTTP/2: writes go through the flusher
)

// conn is a net.Conn whose writes, once it is known to speak HTTP/2, are queued and written by a
// flusher goroutine. Write returns once the bytes are queued; an error of the flusher's write is
// returned by every later Write.
//
// The write deadline holds for queued bytes too, as net/http means it. Its HTTP/2 server sets a
// deadline of now plus its write-byte timeout before each write and clears it after, so that a
// connection is cut off once no byte has gone out for that long; the bytes are still queued when it
// is cleared. So a write queues the time it allowed (its window), and the flusher writes the batch
// with a deadline of now plus the window, set again after each write that made some progress: a
// client that reads slowly keeps its connection, one that reads nothing loses it. A writer waiting
// for room gives up at the deadline itself.
type conn struct {
	net.Conn
	state   atomic.Int32
	matched int // bytes of the preface read so far; only the reading goroutine touches it

	mu            sync.Mutex
	changed       *sync.Cond    // pending grew or emptied, the flusher stopped, or the connection closed
	pending       *[]byte       // queued, not yet handed to the flusher; nil when nothing is queued
	pendingWindow time.Duration // the window of the last write queued in pending; 0: no deadline
	flushing      bool          // the flusher goroutine runs
	err           error         // the first write error; sticky
	closed        bool
	deadline      time.Time // the write deadline, as last set; once closed, the drain limit
	applied       time.Time // the write deadline of the underlying connection
}

// NetConn returns the connection that c batches the writes of.
func (c *conn) NetConn() net.Conn { return c.Conn }

func newConn(c net.Conn) *conn {
	cc := &conn{Conn: c}
	cc.changed = sync.NewCond(&cc.mu)
	return cc
}

// Read reads from the connection, and on the first bytes decides whether it speaks HTTP/2. net/http
// reads a connection before it writes to it, so the decision is made before the first Write.
func (c *conn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && c.state.Load() == undecided {
		c.decide(p[:n])
	}
	return n, err
}

func (c *conn) decide(read []byte) {
	rest := http2Preface[c.matched:]
	k := min(len(read), len(rest))
	switch {
	case !bytes.Equal(read[:k], rest[:k]):
		c.state.Store(direct)
	case c.matched+k == len(http2Preface):
		c.state.Store(batched)
	default:
		c.matched += k
	}
}

func (c *conn) Write(p []byte) (int, error) {
	if c.state.Load() != batched {
		return c.Conn.Write(p)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		switch {
		case c.err != nil:
			return 0, c.err
		case c.closed:
			return 0, net.ErrClosed
		case c.pending == nil:
			c.pending = getBuffer()
			fallthrough
		case len(*c.pending) == 0 || len(*c.pending)+len(p) <= maxPending:
			*c.pending = append(*c.pending, p...)
			c.pendingWindow = 0
			if !c.deadline.IsZero() {
				c.pendingWindow = max(time.Until(c.deadline), time.Millisecond) // one already past fails at once
			}
			if !c.flushing {
				c.flushing = true
				go c.flush()
			}
			return len(p), nil
		case !c.deadline.IsZero() && !time.Now().Before(c.deadline):
			return 0, os.ErrDeadlineExceeded
		}
		c.waitForChange()
	}
}

// flush writes what is pending, batch after batch, and ends when nothing is left.
func (c *conn) flush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.pending != nil && c.err == nil {
		// Yield once before writing, so that frames that other goroutines are about to write for
		// this connection join the batch.
		c.mu.Unlock()
		runtime.Gosched()
		c.mu.Lock()
		batch, window := c.pending, c.pendingWindow
		c.pending = nil
		c.mu.Unlock()
		err := c.write(*batch, window)
		putBuffer(batch)
		c.mu.Lock()
		if err != nil && c.err == nil {
			c.err = err
		}
		c.changed.Broadcast() // room for writers waiting
	}
	if c.pending != nil { // a write failed: what is left will never be written
		putBuffer(c.pending)
		c.pending = nil
	}
	c.flushing = false
	c.changed.Broadcast()
}

// write writes b under a deadline of now plus window (none for 0), set again after each write that
// made progress, as net/http's write-byte timeout does. A close does not wait for it past its drain
// limit: it closes the connection under it.
func (c *conn) write(b []byte, window time.Duration) error {
	for {
		c.mu.Lock()
		var deadline time.Time
		if window > 0 {
			deadline = time.Now().Add(window)
		}
		if !deadline.Equal(c.applied) {
			c.Conn.SetWriteDeadline(deadline)
			c.applied = deadline
		}
		c.mu.Unlock()
		n, err := c.Conn.Write(b)
		b = b[n:]
		if err == nil || n == 0 || !errors.Is(err, os.ErrDeadlineExceeded) || len(b) == 0 {
			return err
		}
	}
}

// waitForChange waits, with c.mu held, until the flusher or Close signals, or the write deadline
// passes.
func (c *conn) waitForChange() {
	if !c.deadline.IsZero() {
		timer := time.AfterFunc(time.Until(c.deadline), func() {
			c.mu.Lock()
			c.changed.Broadcast()
			c.mu.Unlock()
		})
		defer timer.Stop()
	}
	c.changed.Wait()
}

// waitFlushed waits until the flusher has stopped, or the write deadline passes (once closed, the
// drain limit).
func (c *conn) waitFlushed() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.flushing {
		if !c.deadline.IsZero() && !time.Now().Before(c.deadline) {
			return os.ErrDeadlineExceeded
		}
		c.waitForChange()
	}
	return c.err
}

// SetWriteDeadline applies to the bytes written after it (see conn), and to writers waiting for
// room. Once the connection is closed it changes nothing: the drain limit bounds Close's wait.
func (c *conn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.deadline = t
	if c.state.Load() != batched {
		c.applied = t
		return c.Conn.SetWriteDeadline(t)
	}
	c.changed.Broadcast()
	return nil
}

func (c *conn) SetDeadline(t time.Time) error {
	if err := c.SetWriteDeadline(t); err != nil {
		return err
	}
	return c.Conn.SetReadDeadline(t)
}

// Close writes what is pending (for at most closeDrainLimit), then closes the connection.
func (c *conn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return net.ErrClosed
	}
	c.closed = true
	flushing := c.flushing
	if flushing {
		// The drain limit holds for the write under way and for the wait below, after which the
		// connection is closed under the flusher; SetWriteDeadline changes neither from now on.
		c.deadline = time.Now().Add(closeDrainLimit)
		c.applied = c.deadline
		c.Conn.SetWriteDeadline(c.deadline)
		c.changed.Broadcast()
	}
	c.mu.Unlock()
	if flushing {
		c.waitFlushed()
	}
	return c.Conn.Close()
}

// CloseWrite writes what is pending and then shuts the sending side, as net/http does before it
// closes a connection, so that the client reads the whole answer before the end.
func (c *conn) CloseWrite() error {
	if err := c.waitFlushed(); err != nil {
		return err
	}
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.New("the connection cannot close only its sending side")
}

// buffers holds the flushers' buffers between batches.
var buffers = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

func getBuffer() *[]byte { return buffers.Get().(*[]byte) }

func putBuffer(b *[]byte) {
	if cap(*b) > pooledBufferLimit {
		return
	}
	*b = (*b)[:0]
	buffers.Put(b)
}
