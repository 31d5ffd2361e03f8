// Write coalescing for accepted connections. net/http's HTTP/2 server writes every frame of a call
// (HEADERS, DATA, trailers) as its own write(2) and flushes whenever its queue empties, so a unary
// gRPC call costs several system calls. Here a connection's writes append to a buffer that one
// flusher goroutine writes out after yielding once, so frames of many concurrent calls leave in one
// system call; reads go through a 32 KiB buffer for the same reason.
package main

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"time"
)

const (
	coalesceReadBuffer = 32 << 10
	// coalesceMaxPending bounds what a connection holds unwritten; a writer past it waits for the
	// flusher, so a client that does not read slows its own streams down instead of growing memory.
	coalesceMaxPending = 256 << 10
	// closeDrainLimit bounds how long Close waits for pending bytes to reach a client.
	closeDrainLimit = time.Second
)

// coalescingListener wraps every accepted connection in a coalescingConn.
type coalescingListener struct{ net.Listener }

func (l coalescingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return newCoalescingConn(c), nil
}

// coalescingConn is a net.Conn whose writes are buffered and written by one flusher goroutine.
// Write returns once the bytes are queued; an error of the flusher's write is returned by every
// later Write. The write deadline holds for queued bytes as well: the flusher writes under it, and a
// writer waiting for room gives up when it passes.
type coalescingConn struct {
	net.Conn
	reader *bufio.Reader

	mu       sync.Mutex
	changed  *sync.Cond // pending grew, the flusher finished a write, or the connection closed
	pending  []byte     // queued, not yet handed to the flusher
	spare    []byte     // the flusher's last buffer, reused for the next batch
	writing  bool       // the flusher is in a write
	err      error      // the first write error; sticky
	closed   bool
	deadline time.Time // the write deadline
	started  bool      // the flusher goroutine runs
	drained  chan struct{}
}

func newCoalescingConn(c net.Conn) *coalescingConn {
	cc := &coalescingConn{Conn: c, reader: bufio.NewReaderSize(c, coalesceReadBuffer), drained: make(chan struct{})}
	cc.changed = sync.NewCond(&cc.mu)
	return cc
}

func (c *coalescingConn) Read(p []byte) (int, error) { return c.reader.Read(p) }

func (c *coalescingConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		switch {
		case c.err != nil:
			return 0, c.err
		case c.closed:
			return 0, net.ErrClosed
		case len(c.pending) == 0 || len(c.pending)+len(p) <= coalesceMaxPending:
			c.pending = append(c.pending, p...)
			if !c.started {
				c.started = true
				go c.flush()
			}
			c.changed.Broadcast()
			return len(p), nil
		case !c.deadline.IsZero() && !time.Now().Before(c.deadline):
			return 0, os.ErrDeadlineExceeded
		}
		c.waitForChange()
	}
}

// waitForChange waits, with c.mu held, until the flusher or Close signals, or the write deadline
// passes.
func (c *coalescingConn) waitForChange() {
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

// flush writes what is pending, batch after batch, until the connection closes and nothing is left.
func (c *coalescingConn) flush() {
	defer close(c.drained)
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		for len(c.pending) == 0 && !c.closed && c.err == nil {
			c.changed.Wait()
		}
		if len(c.pending) == 0 || c.err != nil {
			return // closed and drained, or broken
		}
		// Yield once before writing, so that frames that other goroutines are about to write for
		// this connection join the batch.
		c.mu.Unlock()
		runtime.Gosched()
		c.mu.Lock()
		batch := c.pending
		c.pending, c.spare = c.spare[:0], nil
		c.writing = true
		c.mu.Unlock()
		_, err := c.Conn.Write(batch)
		c.mu.Lock()
		c.writing = false
		c.spare = batch
		if err != nil && c.err == nil {
			c.err = err
		}
		c.changed.Broadcast()
	}
}

// SetWriteDeadline applies to the flusher's writes and to writers waiting for room.
func (c *coalescingConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	c.deadline = t
	c.changed.Broadcast()
	c.mu.Unlock()
	return c.Conn.SetWriteDeadline(t)
}

func (c *coalescingConn) SetDeadline(t time.Time) error {
	if err := c.SetWriteDeadline(t); err != nil {
		return err
	}
	return c.Conn.SetReadDeadline(t)
}

// Close writes what is pending (for at most closeDrainLimit), then closes the connection.
func (c *coalescingConn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return net.ErrClosed
	}
	c.closed = true
	started := c.started
	c.changed.Broadcast()
	c.mu.Unlock()
	if started {
		c.Conn.SetWriteDeadline(time.Now().Add(closeDrainLimit))
		<-c.drained
	}
	return c.Conn.Close()
}

// CloseWrite writes what is pending and then shuts the sending side, as net/http does before it
// closes an HTTP/1.1 connection, so that the client reads the whole answer before the end.
func (c *coalescingConn) CloseWrite() error {
	if err := c.waitDrained(); err != nil {
		return err
	}
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.New("the connection cannot close only its sending side")
}

// waitDrained waits until nothing is pending or being written, or the write deadline passes.
func (c *coalescingConn) waitDrained() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for (len(c.pending) > 0 || c.writing) && c.err == nil {
		if !c.deadline.IsZero() && !time.Now().Before(c.deadline) {
			return os.ErrDeadlineExceeded
		}
		c.waitForChange()
	}
	return c.err
}

var _ io.Closer = (*coalescingConn)(nil)
