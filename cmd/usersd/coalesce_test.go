package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"
)

// countingConn is the far end of a connection as the flusher sees it: it counts write calls and can
// hold the first one until the test lets it go.
type countingConn struct {
	net.Conn
	mu     sync.Mutex
	writes int
	hold   chan struct{} // while open, the first write waits for it
	held   chan struct{} // closed when the first write is waiting
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.writes++
	first := c.writes == 1
	c.mu.Unlock()
	if first && c.hold != nil {
		close(c.held)
		<-c.hold
	}
	return c.Conn.Write(p)
}

// pipe returns a coalescing connection over one end of an in-memory pipe, and the other end.
func pipe(t *testing.T) (*coalescingConn, net.Conn, *countingConn) {
	t.Helper()
	server, client := net.Pipe()
	counted := &countingConn{Conn: server}
	c := newCoalescingConn(counted)
	t.Cleanup(func() { c.Close(); client.Close() })
	return c, client, counted
}

func TestCoalescingKeepsEveryWriteWholeAndInOrder(t *testing.T) {
	c, client, _ := pipe(t)
	const writers, perWriter = 8, 200
	received := make(chan []byte)
	go func() { b, _ := io.ReadAll(client); received <- b }()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range perWriter {
				if _, err := fmt.Fprintf(c, "<%d:%03d>", w, i); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	c.Close()
	got := <-received
	for w := range writers {
		last := -1
		for _, chunk := range bytes.Split(got, []byte(">")) {
			var cw, i int
			if _, err := fmt.Sscanf(string(chunk), "<%d:%d", &cw, &i); err != nil || cw != w {
				continue
			}
			if i != last+1 {
				t.Fatalf("writer %d: chunk %d after %d: a write was lost, split or reordered", w, i, last)
			}
			last = i
		}
		if last != perWriter-1 {
			t.Fatalf("writer %d: last chunk %d of %d arrived", w, last, perWriter)
		}
	}
}

func TestCoalescingBatchesWritesWhileOneIsUnderWay(t *testing.T) {
	c, client, counted := pipe(t)
	counted.hold, counted.held = make(chan struct{}), make(chan struct{})
	go io.Copy(io.Discard, client)
	if _, err := c.Write([]byte("first")); err != nil {
		t.Fatal(err)
	}
	<-counted.held // the flusher is stuck in its first write; everything now queues
	for range 50 {
		if _, err := c.Write([]byte("frame")); err != nil {
			t.Fatal(err)
		}
	}
	close(counted.hold)
	if err := c.waitDrained(); err != nil {
		t.Fatal(err)
	}
	counted.mu.Lock()
	defer counted.mu.Unlock()
	if counted.writes != 2 {
		t.Fatalf("51 writes reached the connection in %d system writes, want 2 (the first, then one batch)", counted.writes)
	}
}

func TestCoalescingHonoursTheWriteDeadlineForASlowReader(t *testing.T) {
	c, _, _ := pipe(t) // the far end never reads
	if err := c.SetWriteDeadline(time.Now().Add(200 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	chunk := make([]byte, 64<<10)
	var err error
	for err == nil && time.Since(start) < 5*time.Second {
		_, err = c.Write(chunk)
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("writing to a client that does not read: %v, want the deadline to pass", err)
	}
	if waited := time.Since(start); waited > 3*time.Second {
		t.Fatalf("the deadline of 200ms cut the writer off only after %s", waited)
	}
	if _, err := c.Write([]byte("more")); err == nil {
		t.Fatal("a write after the deadline passed succeeded")
	}
}

func TestCoalescingSurfacesWriteErrors(t *testing.T) {
	c, client, _ := pipe(t)
	client.Close() // the client goes away
	var err error
	for range 100 {
		if _, err = c.Write([]byte("x")); err != nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if err == nil {
		t.Fatal("writes kept succeeding after the client closed the connection")
	}
}

func TestCoalescingCloseDeliversWhatWasWritten(t *testing.T) {
	c, client, _ := pipe(t)
	received := make(chan []byte)
	go func() { b, _ := io.ReadAll(client); received <- b }()
	want := bytes.Repeat([]byte("answer "), 10_000)
	if _, err := c.Write(want); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if got := <-received; !bytes.Equal(got, want) {
		t.Fatalf("the client read %d bytes before the close, want all %d", len(got), len(want))
	}
	if _, err := c.Write([]byte("late")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("a write after Close: %v, want net.ErrClosed", err)
	}
}
