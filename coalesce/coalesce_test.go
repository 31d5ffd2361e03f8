package coalesce

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

func (c *countingConn) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writes
}

// pipe returns a connection over one end of an in-memory pipe that has read the HTTP/2 preface
// from the other end, and that other end.
func pipe(t *testing.T) (*conn, net.Conn, *countingConn) {
	t.Helper()
	c, client, counted := pipeAfter(t, http2Preface)
	if got := c.state.Load(); got != batched {
		t.Fatalf("after the HTTP/2 preface the connection is in state %d, want batched", got)
	}
	return c, client, counted
}

// pipeAfter returns a connection over one end of an in-memory pipe that has read first from the
// other end, in the pieces given, and that other end.
func pipeAfter(t *testing.T, first ...[]byte) (*conn, net.Conn, *countingConn) {
	t.Helper()
	server, client := net.Pipe()
	counted := &countingConn{Conn: server}
	c := newConn(counted)
	t.Cleanup(func() { c.Close(); client.Close() })
	go func() {
		for _, piece := range first {
			client.Write(piece)
		}
	}()
	for _, piece := range first {
		if _, err := io.ReadFull(c, make([]byte, len(piece))); err != nil {
			t.Fatal(err)
		}
	}
	return c, client, counted
}

func TestOnlyHTTP2ConnectionsAreBatched(t *testing.T) {
	preface := http2Preface
	for _, tc := range []struct {
		name  string
		first [][]byte
		want  int32
	}{
		{"HTTP/2 preface in one read", [][]byte{preface}, batched},
		{"HTTP/2 preface in three reads", [][]byte{preface[:3], preface[3:20], preface[20:]}, batched},
		{"HTTP/2 preface and a frame", [][]byte{append(append([]byte{}, preface...), 0, 0, 0, 4, 0, 0, 0, 0, 0)}, batched},
		{"HTTP/1.1 request", [][]byte{[]byte("GET /users/1 HTTP/1.1\r\nHost: x\r\n\r\n")}, direct},
		{"HTTP/1.1 method that starts like the preface", [][]byte{[]byte("PRI"), []byte("NT / HTTP/1.1\r\n")}, direct},
		{"part of the preface so far", [][]byte{preface[:10]}, undecided},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _, _ := pipeAfter(t, tc.first...)
			if got := c.state.Load(); got != tc.want {
				t.Fatalf("state %d, want %d", got, tc.want)
			}
		})
	}
}

func TestDirectConnectionsWriteAtOnce(t *testing.T) {
	c, client, counted := pipeAfter(t, []byte("GET / HTTP/1.1\r\n\r\n"))
	go io.Copy(io.Discard, client)
	for i := 1; i <= 3; i++ {
		if _, err := c.Write([]byte("answer")); err != nil {
			t.Fatal(err)
		}
		// No flusher: the bytes reached the connection before Write returned.
		if got := counted.count(); got != i {
			t.Fatalf("after %d writes the connection saw %d", i, got)
		}
	}
}

func TestAnIdleConnectionHoldsNoFlusherOrBuffer(t *testing.T) {
	c, client, _ := pipe(t)
	go io.Copy(io.Discard, client)
	for range 10 {
		if _, err := c.Write(bytes.Repeat([]byte("frame"), 1000)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.waitFlushed(); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.flushing || c.pending != nil {
		t.Fatalf("once everything is written: flusher running %t, buffer held %t; want neither", c.flushing, c.pending != nil)
	}
}

func TestKeepsEveryWriteWholeAndInOrder(t *testing.T) {
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

func TestBatchesWritesWhileOneIsUnderWay(t *testing.T) {
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
	if err := c.waitFlushed(); err != nil {
		t.Fatal(err)
	}
	counted.mu.Lock()
	defer counted.mu.Unlock()
	if counted.writes != 2 {
		t.Fatalf("51 writes reached the connection in %d system writes, want 2 (the first, then one batch)", counted.writes)
	}
}

// TestHonoursTheWriteDeadlineForASlowReader: writes to a client that never reads end with the
// deadline's error. How soon after the 200 ms is only logged: the 30 s the writes may go on is a
// hang detector (a writer the deadline does not cut off writes, or blocks, for ever), where a bound
// of 3 s once stood that a machine busy compiling something else could break.
func TestHonoursTheWriteDeadlineForASlowReader(t *testing.T) {
	c, _, _ := pipe(t) // the far end never reads
	if err := c.SetWriteDeadline(time.Now().Add(200 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	chunk := make([]byte, 64<<10)
	var err error
	for err == nil && time.Since(start) < 30*time.Second {
		_, err = c.Write(chunk)
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("writing to a client that does not read for %s: %v, want the deadline to pass", time.Since(start), err)
	}
	t.Logf("the deadline of 200ms cut the writer off after %s", time.Since(start).Round(time.Millisecond))
	if _, err := c.Write([]byte("more")); err == nil {
		t.Fatal("a write after the deadline passed succeeded")
	}
}

func TestSurfacesWriteErrors(t *testing.T) {
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

func TestCloseDeliversWhatWasWritten(t *testing.T) {
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

// TestAWriteByteTimeoutHoldsForQueuedBytes writes the way net/http's HTTP/2 server does with a
// WriteByteTimeout: a deadline before each write, cleared after it. The bytes are queued, not
// written, when the deadline is cleared, so the flusher must still write them under it: a client that
// reads nothing is cut off after the timeout, not held open for as long as it stays connected.
func TestAWriteByteTimeoutHoldsForQueuedBytes(t *testing.T) {
	c, _, _ := pipe(t) // the far end never reads
	const timeout = 200 * time.Millisecond
	writeWithByteTimeout := func(p []byte) error {
		c.SetWriteDeadline(time.Now().Add(timeout))
		_, err := c.Write(p)
		c.SetWriteDeadline(time.Time{})
		return err
	}
	if err := writeWithByteTimeout(make([]byte, 1<<10)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var err error
	for err == nil && time.Since(start) < 10*time.Second {
		time.Sleep(10 * time.Millisecond)
		err = writeWithByteTimeout([]byte("x"))
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("after %s of a client that reads nothing, a write returned %v, want the deadline to have passed", time.Since(start).Round(time.Millisecond), err)
	}
	t.Logf("a write timeout of %s cut the connection off after %s", timeout, time.Since(start).Round(time.Millisecond))
}

// TestASlowReaderWithinTheWriteByteTimeoutIsKept: the write-byte timeout cuts a client off after
// that long without a byte going out, not after that long for a whole batch: a client that reads
// slowly but steadily gets everything, however long the batch takes.
func TestASlowReaderWithinTheWriteByteTimeoutIsKept(t *testing.T) {
	c, client, _ := pipe(t)
	const timeout = 200 * time.Millisecond
	want := bytes.Repeat([]byte("slow "), 16<<10) // 80 KiB: read in 4 KiB steps every 50 ms, about a second
	c.SetWriteDeadline(time.Now().Add(timeout))
	if _, err := c.Write(want); err != nil {
		t.Fatal(err)
	}
	c.SetWriteDeadline(time.Time{})
	var got []byte
	buf := make([]byte, 4<<10)
	for len(got) < len(want) {
		time.Sleep(50 * time.Millisecond)
		client.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, err := client.Read(buf)
		if err != nil {
			t.Fatalf("after %d of %d bytes: %v", len(got), len(want), err)
		}
		got = append(got, buf[:n]...)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the bytes read differ from those written")
	}
	if _, err := c.Write([]byte("more")); err != nil {
		t.Fatalf("a slow reader within the timeout was cut off: %v", err)
	}
}

// TestCloseKeepsItsDrainLimit: a client that reads, but slowly, keeps making progress, and each
// write that makes progress is given the write-byte timeout again; a close must still end within its
// drain limit, whatever net/http does with the deadline meanwhile (it clears the deadline after a
// write, even one that Close ended).
func TestCloseKeepsItsDrainLimit(t *testing.T) {
	c, client, _ := pipe(t)
	go func() { // about 20 KiB a second: the 256 KiB queued would take some 13 s
		buf := make([]byte, 1<<10)
		for {
			time.Sleep(50 * time.Millisecond)
			if _, err := client.Read(buf); err != nil {
				return
			}
		}
	}()
	c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(make([]byte, maxPending)); err != nil {
		t.Fatal(err)
	}
	c.SetWriteDeadline(time.Time{})
	closed := make(chan error, 1)
	start := time.Now()
	go func() { closed <- c.Close() }()
	for !func() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.closed }() {
		time.Sleep(time.Millisecond)
	}
	c.SetWriteDeadline(time.Time{})
	select {
	case <-closed:
		t.Logf("closed after %s", time.Since(start).Round(time.Millisecond))
	case <-time.After(closeDrainLimit + 3*time.Second):
		t.Fatalf("Close still waits %s after it began, past its drain limit of %s", time.Since(start).Round(time.Millisecond), closeDrainLimit)
	}
}
