package main

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// rawH2C is an HTTP/2 connection driven frame by frame, for clients that no well-behaved library
// would be: one that never reads, say.
type rawH2C struct {
	conn   net.Conn
	framer *http2.Framer
	next   uint32 // the next stream id
}

// dialRawH2C opens a prior-knowledge h2c connection and sends the preface and SETTINGS. The
// windows are opened wide, so that only the client's reading (or not) limits what the server sends.
func dialRawH2C(t *testing.T, baseURL string) *rawH2C {
	t.Helper()
	conn, err := net.DialTimeout("tcp", strings.TrimPrefix(baseURL, "http://"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	c := &rawH2C{conn: conn, framer: http2.NewFramer(conn, conn), next: 1}
	if err := c.framer.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1<<31 - 1}); err != nil {
		t.Fatal(err)
	}
	if err := c.framer.WriteWindowUpdate(0, 1<<31-1-65535); err != nil {
		t.Fatal(err)
	}
	return c
}

// get opens a stream with a GET of path and returns its id.
func (c *rawH2C) get(t *testing.T, path string) uint32 {
	t.Helper()
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", "usersd"}, {":path", path}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	id := c.next
	c.next += 2
	if err := c.framer.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
		t.Fatalf("open stream %d: %v", id, err)
	}
	return id
}

// TestHTTP2ClientThatNeverReadsIsCutOff asks for a large answer on many streams of one connection
// and never reads. The server must give up on the connection once it has made no write progress for
// the HTTP/2 write-byte timeout, releasing the streams' goroutines and buffers: before that limit
// existed, such a connection held them until the client went away, and held up a graceful shutdown.
func TestHTTP2ClientThatNeverReadsIsCutOff(t *testing.T) {
	const writeByteTimeout = time.Second
	s := startServerOn(t, t.TempDir()+"/users.db", map[string]string{
		"USERS_HTTP2_WRITE_BYTE_TIMEOUT": writeByteTimeout.String(),
	})
	page, err := os.ReadFile("../../web/public/app.js") // the largest answer the server has
	if err != nil {
		t.Fatal(err)
	}
	before := runtime.NumGoroutine()

	c := dialRawH2C(t, s.baseURL)
	const streams = 100 // about 100 x 130 KB: more than the socket buffers on both sides hold
	for range streams {
		c.get(t, "/app.js")
	}
	// Reading nothing for a while: the server fills the socket and then stops making progress.
	time.Sleep(4 * writeByteTimeout)

	// Now read what was sent: it must end in the server closing the connection, before every
	// stream's answer arrived.
	c.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	var received int
	var ended int
	for {
		f, err := c.framer.ReadFrame()
		if err != nil {
			var netErr net.Error
			if errors.As(err, &netErr) && netErr.Timeout() {
				t.Fatalf("the connection is still open %s after the client stopped reading (%d bytes and %d of %d answers received)", 4*writeByteTimeout+10*time.Second, received, ended, streams)
			}
			break // EOF or reset: the server closed the connection
		}
		if d, ok := f.(*http2.DataFrame); ok {
			received += len(d.Data())
			if d.StreamEnded() {
				ended++
			}
		}
	}
	if ended == streams || received >= streams*len(page) {
		t.Fatalf("every answer was delivered (%d bytes, %d streams): the client was never cut off", received, ended)
	}

	// The streams' handlers are gone with the connection.
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before+5 {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines before the client, %d after the server cut it off", before, runtime.NumGoroutine())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
