package apitest

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// RawH2C is an HTTP/2 connection driven frame by frame, for clients that no well-behaved library
// would be: one that never reads, or never lets the server send, say.
type RawH2C struct {
	Conn   net.Conn
	Framer *http2.Framer
	next   uint32 // the next stream id
}

// WideWindow opens the flow-control windows wide, so that only the client's reading (or not) limits
// what the server sends; a window of 0 lets the server send no byte of any answer's body.
const WideWindow = 1<<31 - 1

// DialRawH2C opens a prior-knowledge h2c connection and sends the preface and SETTINGS, with window
// as every stream's flow-control window and the connection's (which cannot go below its initial
// 65,535 bytes: with window 0, no stream may use it).
func DialRawH2C(t *testing.T, baseURL string, window uint32) *RawH2C {
	t.Helper()
	conn, err := net.DialTimeout("tcp", strings.TrimPrefix(baseURL, "http://"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	c := &RawH2C{Conn: conn, Framer: http2.NewFramer(conn, conn), next: 1}
	if err := c.Framer.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: window}); err != nil {
		t.Fatal(err)
	}
	if window > 65535 {
		if err := c.Framer.WriteWindowUpdate(0, window-65535); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// Get opens a stream with a GET of path and returns its id.
func (c *RawH2C) Get(t *testing.T, path string) uint32 {
	t.Helper()
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", "usersd"}, {":path", path}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	id := c.next
	c.next += 2
	if err := c.Framer.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
		t.Fatalf("open stream %d: %v", id, err)
	}
	return id
}

// ReadHeaders reads frames until it has the response headers of n streams, or the deadline
// passes, and returns each stream's headers (":status" among them). Reading frames opens no
// window: a client with a window of 0 still receives no byte of a body.
func (c *RawH2C) ReadHeaders(t *testing.T, n int, deadline time.Time) map[uint32]http.Header {
	t.Helper()
	c.Conn.SetReadDeadline(deadline)
	defer c.Conn.SetReadDeadline(time.Time{})
	if c.Framer.ReadMetaHeaders == nil {
		c.Framer.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	}
	headers := map[uint32]http.Header{}
	for len(headers) < n {
		f, err := c.Framer.ReadFrame()
		if err != nil {
			t.Fatalf("after the headers of %d of %d streams: %v", len(headers), n, err)
		}
		meta, ok := f.(*http2.MetaHeadersFrame)
		if !ok {
			continue
		}
		h := http.Header{}
		for _, field := range meta.Fields {
			h.Add(field.Name, field.Value)
		}
		headers[meta.StreamID] = h
	}
	return headers
}
