package main

import (
	"bytes"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"usersd/internal/apitest"
)

// TestAWatchSendsABatchOfChangesInFewFrames: the changes a watch catches up on go out with one
// flush for the batch, not one for each change, so that on HTTP/2 they fill DATA frames instead of
// each taking a frame (and a trip through the connection's goroutine) of its own.
func TestAWatchSendsABatchOfChangesInFewFrames(t *testing.T) {
	s := startServer(t)
	const changes = 200
	insertUsers(t, s.dbPath, changes)

	c := apitest.DialRawH2C(t, s.BaseURL, apitest.WideWindow)
	stream := c.Get(t, "/users/events?afterSequence=0")
	c.Conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	var body bytes.Buffer
	frames := 0
	for bytes.Count(body.Bytes(), []byte("event: created")) < changes {
		f, err := c.Framer.ReadFrame()
		if err != nil {
			t.Fatalf("after %d DATA frames and %d changes: %v", frames, bytes.Count(body.Bytes(), []byte("event: created")), err)
		}
		if data, ok := f.(*http2.DataFrame); ok && data.StreamID == stream {
			frames++
			body.Write(data.Data())
		}
	}
	// The heartbeat that starts the stream is flushed alone, and the server's writer cuts a DATA
	// frame at every 4 KiB at the most.
	if most := 1 + body.Len()/(4<<10) + 2; frames > most {
		t.Fatalf("%d changes (%d bytes) came in %d DATA frames, want at most %d", changes, body.Len(), frames, most)
	}
	t.Logf("%d changes, %d bytes, %d DATA frames", changes, body.Len(), frames)
}
