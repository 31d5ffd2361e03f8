package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"usersd/internal/apitest"
)

// TestHTTP2ClientThatNeverReadsIsCutOff asks for a large answer on many streams of each of ten
// connections and never reads. The server must give up on every connection once it has made no
// write progress for the HTTP/2 write-byte timeout, releasing the streams' goroutines and buffers:
// before that limit existed, such a connection held them until the client went away, and held up a
// graceful shutdown; and before the write batcher (package coalesce) wrote its queue under the
// deadline, a connection whose queue stayed small was held as long.
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

	const conns, streams = 10, 100 // about 100 x 130 KB a connection: more than the socket buffers on both sides hold
	clients := make([]*apitest.RawH2C, conns)
	for i := range clients {
		clients[i] = apitest.DialRawH2C(t, s.BaseURL, apitest.WideWindow)
		for range streams {
			clients[i].Get(t, "/app.js")
		}
	}
	// Reading nothing for a while: the server fills the sockets and then stops making progress.
	// Filling them takes the server most of a second on a quiet machine, and seconds under the race
	// detector beside other tests: until it has, a connection still makes progress, and a client
	// that read it then would take every answer (seen once with 4 s). Eight write-byte timeouts
	// leave room for both.
	const unread = 8 * writeByteTimeout
	time.Sleep(unread)

	// Now read what was sent: on every connection it must end in the server closing it, before
	// every stream's answer arrived.
	for i, c := range clients {
		c.Conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		var received, ended int
		for {
			f, err := c.Framer.ReadFrame()
			if err != nil {
				var netErr net.Error
				if errors.As(err, &netErr) && netErr.Timeout() {
					t.Fatalf("connection %d is still open %s after the client stopped reading (%d bytes and %d of %d answers received)", i, unread+10*time.Second, received, ended, streams)
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
			t.Fatalf("connection %d: every answer was delivered (%d bytes, %d streams): the client was never cut off", i, received, ended)
		}
	}

	// The streams' handlers are gone with the connections; the HTTP/2 workers that served them
	// (package warmstack) end after two idle seconds.
	deadline := time.Now().Add(8 * time.Second)
	for runtime.NumGoroutine() > before+5 {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines before the clients, %d after the server cut them off", before, runtime.NumGoroutine())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestRapidResetsOnListsAreNotFaults opens thousands of list requests on one HTTP/2 connection and
// resets each right after its HEADERS, so that many are cancelled inside their read transaction.
// A cancelled read is the client's doing: none may be answered (or logged) as a 500, and none may
// log at ERROR. On SQLite the driver reports the cancellation as "interrupted" or as a transaction
// already rolled back, which once went out as internal errors.
func TestRapidResetsOnListsAreNotFaults(t *testing.T) {
	s := startServer(t)
	user := apitest.IDOf(t, s.CreateUser(t, "poster", "editor"))
	for i := range 30 {
		s.CreateUser(t, fmt.Sprint("user ", i), "viewer")
		resp := s.Do(t, apitest.HTTP1Client, request{Method: "POST", Path: fmt.Sprintf("/users/%d/posts", user), Header: map[string]string{"Content-Type": "application/json"}, Body: fmt.Sprintf(`{"title":"post %d"}`, i), Key: true})
		if resp.Status != http.StatusCreated {
			t.Fatalf("create post: %d %s", resp.Status, resp.Body)
		}
	}
	c := apitest.DialRawH2C(t, s.BaseURL, apitest.WideWindow)
	go io.Copy(io.Discard, c.Conn) // read and drop whatever the server still sends
	const resets = 6000
	paths := []string{fmt.Sprintf("/users/%d/posts?limit=100", user), "/users?limit=100&sort=-createdAt", "/users?role=viewer&limit=100"}
	for i := range resets {
		id := c.Get(t, paths[i%len(paths)])
		if err := c.Framer.WriteRSTStream(id, http2.ErrCodeCancel); err != nil {
			t.Fatal(err)
		}
	}
	// The connection still works: a last request on a fresh connection is answered.
	if resp := s.Do(t, apitest.H2CClient, request{Method: "GET", Path: "/users?limit=1"}); resp.Status != http.StatusOK {
		t.Fatalf("after the resets: %d %s", resp.Status, resp.Body)
	}
	time.Sleep(500 * time.Millisecond) // let the last cancelled handlers log
	if errs := s.logs.Entries(map[string]any{"level": "ERROR"}); len(errs) > 0 {
		t.Fatalf("%d ERROR lines after %d resets, the first: %v", len(errs), resets, errs[0])
	}
	if faults := s.logs.Entries(map[string]any{"status": float64(500)}); len(faults) > 0 {
		t.Fatalf("%d requests answered 500 after %d resets, the first: %v", len(faults), resets, faults[0])
	}
	cancelled := len(s.logs.Entries(map[string]any{"status": float64(499)}))
	t.Logf("%d of %d reset requests were cancelled in the handler (499); the rest finished or never started", cancelled, resets)
}

// TestReadsThatOutliveTheirDeadlineAre504 gives each request a deadline so short that many lists
// reach it inside their read transaction, and expects every answer to be 200 or 504: the driver's
// words for a statement cut short by the deadline are not a fault of the service.
func TestReadsThatOutliveTheirDeadlineAre504(t *testing.T) {
	dbPath := t.TempDir() + "/users.db"
	seeder := startServerOn(t, dbPath, nil)
	for i := range 100 {
		seeder.CreateUser(t, fmt.Sprint("user ", i), "viewer")
	}
	seeder.stop()
	s := startServerOn(t, dbPath, map[string]string{"USERS_REQUEST_TIMEOUT": "300us"})
	answers := map[int]int{}
	for i := 0; i < 3000 && answers[http.StatusGatewayTimeout] < 20; i++ {
		resp := s.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: "/users?limit=100&role=viewer&sort=-name"})
		answers[resp.Status]++
		if resp.Status != http.StatusOK && resp.Status != http.StatusGatewayTimeout {
			t.Fatalf("a list past its deadline answered %d %s; want 200 or 504", resp.Status, resp.Body)
		}
	}
	if answers[http.StatusGatewayTimeout] == 0 {
		t.Fatalf("no list of 3,000 reached its 300 µs deadline (%v), so nothing was tested", answers)
	}
	t.Logf("answers: %v", answers)
}

// TestHTTP2PeerThatVanishedIsClosed: a connection whose peer goes silent without closing is pinged
// once it has been silent for the ping timeout, and closed when the ping goes unanswered for as
// long again.
func TestHTTP2PeerThatVanishedIsClosed(t *testing.T) {
	const pingTimeout = 500 * time.Millisecond
	s := startServerOn(t, t.TempDir()+"/users.db", map[string]string{"USERS_HTTP2_PING_TIMEOUT": pingTimeout.String()})
	c := apitest.DialRawH2C(t, s.BaseURL, apitest.WideWindow)
	start := time.Now()
	c.Conn.SetReadDeadline(start.Add(10 * time.Second))
	var pingedAfter time.Duration
	for {
		f, err := c.Framer.ReadFrame()
		if err != nil {
			var netErr net.Error
			if errors.As(err, &netErr) && netErr.Timeout() {
				t.Fatal("the connection of a silent peer is still open after 10s")
			}
			break // the server closed the connection
		}
		if ping, ok := f.(*http2.PingFrame); ok && !ping.IsAck() && pingedAfter == 0 {
			pingedAfter = time.Since(start) // and never answered
		}
	}
	closedAfter := time.Since(start)
	// The server's clock of silence starts at the last frame it read, a little before start, and the
	// ping and the close each take their own moment to reach the test: a tenth of slack either way.
	const slack = pingTimeout / 10
	if pingedAfter < pingTimeout-slack || closedAfter-pingedAfter < pingTimeout-slack {
		t.Fatalf("pinged after %s, closed after %s; want a ping after %s of silence, then %s more before the close",
			pingedAfter, closedAfter, pingTimeout, pingTimeout)
	}
	t.Logf("pinged after %s, closed after %s", pingedAfter.Round(time.Millisecond), closedAfter.Round(time.Millisecond))
}
