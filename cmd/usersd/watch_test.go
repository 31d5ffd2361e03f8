package main

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	usersv1 "usersd/gen/users/v1"
	"usersd/gen/users/v1/usersv1connect"
	"usersd/internal/apitest"
	"usersd/store"
	"usersd/store/sqlstore"
)

// TestAWatchResumesWithNothingLostAndNothingTwice: a watch that drops, or whose server restarts,
// resumes after the last sequence it read and gets exactly the changes it missed, by after_sequence
// on RPC and by Last-Event-ID or afterSequence on SSE.
func TestAWatchResumesWithNothingLostAndNothingTwice(t *testing.T) {
	dbPath := t.TempDir() + "/users.db"
	s := startServerOn(t, dbPath, nil)
	for _, p := range apitest.WatchProtocols() {
		t.Run(p.Name, func(t *testing.T) {
			w := apitest.StartWatch(t, s.Server, p, -1, "")
			first := apitest.UserID(t, s.CreateUser(t, "first", ""))
			last := w.WantChanges(t, apitest.Change{Kind: usersv1.UserEvent_KIND_CREATED, ID: first, Name: "first"})[0].GetSequence()
			w.Cancel() // the connection drops
			missed := apitest.UserID(t, s.CreateUser(t, "missed", ""))
			s.PatchName(t, first, "first, renamed")

			resumed := apitest.StartWatch(t, s.Server, p, last, "")
			resumed.WantChanges(t, apitest.Change{Kind: usersv1.UserEvent_KIND_CREATED, ID: missed, Name: "missed"}, apitest.Change{Kind: usersv1.UserEvent_KIND_UPDATED, ID: first, Name: "first, renamed"})
			live := apitest.UserID(t, s.CreateUser(t, "live", ""))
			resumed.WantChanges(t, apitest.Change{Kind: usersv1.UserEvent_KIND_CREATED, ID: live, Name: "live"})
			resumed.Quiet(t, 200*time.Millisecond)
		})
	}
	t.Run("Last-Event-ID wins over afterSequence", func(t *testing.T) {
		a := apitest.UserID(t, s.CreateUser(t, "a", ""))
		b := apitest.UserID(t, s.CreateUser(t, "b", ""))
		all := apitest.StartWatch(t, s.Server, apitest.WatchProtocols()[0], 0, "")
		var aSequence int64
		for {
			e := all.Next(t, 5*time.Second)
			if e.GetUser().GetId() == a {
				aSequence = e.GetSequence()
				break
			}
		}
		res, err := apitest.OpenEventStream(context.Background(), s.Server, apitest.HTTP1Client, 0, "", http.Header{"Last-Event-Id": {strconv.FormatInt(aSequence, 10)}})
		if err != nil {
			t.Fatal(err)
		}
		w := &apitest.WatchStream{Events: make(chan apitest.WatchedEvent, 100), End: make(chan error, 1), Cancel: func() { res.Body.Close() }}
		go func() { w.End <- apitest.ReadEventStream(res.Body, w.Events) }()
		t.Cleanup(w.Cancel)
		w.WantChanges(t, apitest.Change{Kind: usersv1.UserEvent_KIND_CREATED, ID: b, Name: "b"})
	})

	t.Run("after a restart", func(t *testing.T) {
		p := apitest.WatchProtocols()[2] // gRPC
		w := apitest.StartWatch(t, s.Server, p, -1, "")
		before := apitest.UserID(t, s.CreateUser(t, "before the restart", ""))
		last := w.WantChanges(t, apitest.Change{Kind: usersv1.UserEvent_KIND_CREATED, ID: before, Name: "before the restart"})[0].GetSequence()
		s.stop()
		apitest.WantWatchCode(t, p, w.Ended(t, 5*time.Second), connect.CodeUnavailable, 0)

		restarted := startServerOn(t, dbPath, nil)
		after := apitest.UserID(t, restarted.CreateUser(t, "after the restart", ""))
		for _, p := range apitest.WatchProtocols() {
			resumed := apitest.StartWatch(t, restarted.Server, p, last, "")
			resumed.WantChanges(t, apitest.Change{Kind: usersv1.UserEvent_KIND_CREATED, ID: after, Name: "after the restart"})
			resumed.Quiet(t, 100*time.Millisecond)
		}
	})
}

// TestAWatchOutlivesTheServersTimeoutsWithHeartbeats: the write, read and request timeouts end
// ordinary requests, not watches, which send heartbeats while nothing changes and still deliver
// changes long after every timeout has passed.
func TestAWatchOutlivesTheServersTimeoutsWithHeartbeats(t *testing.T) {
	s := startServerOn(t, t.TempDir()+"/users.db", map[string]string{
		"USERS_WRITE_TIMEOUT": "1s", "USERS_READ_TIMEOUT": "1s", "USERS_REQUEST_TIMEOUT": "1s", "USERS_WATCH_HEARTBEAT": "200ms",
	})
	var watches []*apitest.WatchStream
	for _, p := range apitest.WatchProtocols() {
		watches = append(watches, apitest.StartWatch(t, s.Server, p, -1, ""))
	}
	time.Sleep(2500 * time.Millisecond)
	id := apitest.UserID(t, s.CreateUser(t, "late", ""))
	for i, w := range watches {
		heartbeats := 0
	read:
		for {
			select {
			case e := <-w.Events:
				if e.GetKind() != usersv1.UserEvent_KIND_HEARTBEAT {
					if e.GetUser().GetId() != id {
						t.Fatalf("%s: %v, want the create of user %d", apitest.WatchProtocols()[i].Name, e.UserEvent, id)
					}
					break read
				}
				heartbeats++
			case err := <-w.End:
				t.Fatalf("%s: the watch ended after the timeouts: %v", apitest.WatchProtocols()[i].Name, err)
			case <-time.After(5 * time.Second):
				t.Fatalf("%s: the create did not arrive", apitest.WatchProtocols()[i].Name)
			}
		}
		if heartbeats < 5 {
			t.Errorf("%s: %d heartbeats in 2.5s at one per 200ms of silence", apitest.WatchProtocols()[i].Name, heartbeats)
		}
	}
}

// TestWatchesEndCleanlyWhenTheServerStops: SIGTERM ends every watch at once, UNAVAILABLE on RPC
// and an error event on SSE, and the server stops well within its grace: a stop that waited for the
// open watches would take all of the grace, which is why it is a minute. (The test once held the
// stop to 5 s instead, a bound on speed that a busy machine could break.)
func TestWatchesEndCleanlyWhenTheServerStops(t *testing.T) {
	const grace = time.Minute
	s := startServerOn(t, t.TempDir()+"/users.db", map[string]string{"USERS_SHUTDOWN_GRACE": grace.String()})
	var watches []*apitest.WatchStream
	for _, p := range apitest.WatchProtocols() {
		watches = append(watches, apitest.StartWatch(t, s.Server, p, -1, ""))
	}
	start := time.Now()
	s.stop() // fails the test if run returns an error
	if took := time.Since(start); took > grace/2 {
		t.Errorf("stopping with open watches took %s, near the %s grace: it waited for them", took, grace)
	}
	for i, w := range watches {
		apitest.WantWatchCode(t, apitest.WatchProtocols()[i], w.Ended(t, 5*time.Second), connect.CodeUnavailable, 0)
	}
}

// TestAWatchOfManyChangesIsDeliveredInOrder: a burst of changes larger than a read of the log
// reaches a watcher whole, in order, and a resume from before it reads it whole again.
func TestAWatchOfManyChangesIsDeliveredInOrder(t *testing.T) {
	s := startServer(t)
	w := apitest.StartWatch(t, s.Server, apitest.WatchProtocols()[2], -1, "")
	// Written behind the server's back, as another replica would: only the log tells of them.
	db, err := sqlstore.Open(context.Background(), s.dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const n = 1200
	var sequences []int64
	for i := range n {
		if _, err := db.CreateUser(context.Background(), store.NewUser{Name: fmt.Sprintf("burst %d", i)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	for range n {
		sequences = append(sequences, w.Next(t, 5*time.Second).GetSequence())
	}
	if !slices.IsSorted(sequences) || len(slices.Compact(slices.Clone(sequences))) != n {
		t.Fatalf("sequences of the burst are not growing: %v", sequences)
	}
	w.Quiet(t, 200*time.Millisecond)
}

// TestAWatcherThatDoesNotReadIsEndedNotBuffered: a client that stops reading while changes pour in
// is ended with RESOURCE_EXHAUSTED (an error event on SSE) once it falls too far behind, so the
// server holds a bounded queue for it rather than every change; the client reads the end once it
// reads again. Its connection takes little: SSE over a socket with a small receive buffer, and gRPC
// over HTTP/2 with a small stream window.
func TestAWatcherThatDoesNotReadIsEndedNotBuffered(t *testing.T) {
	s := startServerOn(t, t.TempDir()+"/users.db", map[string]string{"USERS_ADMIN_ADDR": "127.0.0.1:0"})
	admin := adminServer(t, s)
	const burst = 50_000 // several times the backlog a watcher may have, and more than sockets hold
	for _, p := range []string{"SSE", "gRPC"} {
		t.Run(p, func(t *testing.T) {
			cut := admin.Metric(t, "usersd_watches_refused_total", map[string]string{"reason": "too_slow"})
			var readAll func() (created int, end error)
			switch p {
			case "SSE":
				// The receive buffer is set before the connection is made, so that the window the
				// client offers is small from the start.
				dialer := net.Dialer{Control: func(_, _ string, raw syscall.RawConn) error {
					var err error
					raw.Control(func(fd uintptr) { err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4<<10) })
					return err
				}}
				conn, err := dialer.Dial("tcp", strings.TrimPrefix(s.BaseURL, "http://"))
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				fmt.Fprintf(conn, "GET /users/events HTTP/1.1\r\nHost: usersd\r\n\r\n")
				readAll = func() (int, error) {
					conn.SetReadDeadline(time.Now().Add(30 * time.Second))
					res, err := http.ReadResponse(bufio.NewReader(conn), nil)
					if err != nil {
						return 0, err
					}
					body, err := io.ReadAll(res.Body)
					if !strings.Contains(string(body), "event: error\ndata: {\"error\":\"this watch fell too far behind") {
						return 0, fmt.Errorf("the stream did not end with the error event (read error %v); its tail: %q", err, body[max(0, len(body)-300):])
					}
					return strings.Count(string(body), "event: created"), nil
				}
			case "gRPC":
				client := smallWindowClient(t, s)
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				stream, err := client.WatchUsers(ctx, &usersv1.WatchUsersRequest{})
				if err != nil {
					t.Fatal(err)
				}
				defer stream.Close()
				readAll = func() (int, error) {
					created := 0
					for stream.Receive() {
						if stream.Msg().GetKind() == usersv1.UserEvent_KIND_CREATED {
							created++
						}
					}
					if connect.CodeOf(stream.Err()) != connect.CodeResourceExhausted {
						return created, fmt.Errorf("the stream ended with %v, want resource_exhausted", stream.Err())
					}
					return created, nil
				}
			}
			waitForMetric(t, admin, "usersd_watchers", nil, 1)
			insertUsers(t, s.dbPath, burst)
			waitForMetric(t, admin, "usersd_watches_refused_total", map[string]string{"reason": "too_slow"}, cut+1)
			created, err := readAll()
			if err != nil {
				t.Fatal(err)
			}
			if created >= burst {
				t.Fatalf("the watcher got all %d changes: it was never behind", created)
			}
			waitForMetric(t, admin, "usersd_watchers", nil, 0)
		})
	}
}

// smallWindowClient is a gRPC client over HTTP/2 whose connection takes at most 64 KiB that it has
// not read: a client that stops reading soon holds the server's writes up.
func smallWindowClient(t *testing.T, s *testServer) usersv1connect.UsersClient {
	transport := &http.Transport{Protocols: new(http.Protocols), HTTP2: &http.HTTP2Config{MaxReceiveBufferPerStream: 64 << 10, MaxReceiveBufferPerConnection: 64 << 10}}
	transport.Protocols.SetUnencryptedHTTP2(true)
	t.Cleanup(transport.CloseIdleConnections)
	return usersv1connect.NewUsersClient(&http.Client{Transport: transport}, s.BaseURL, connect.WithGRPC())
}

// TestAWatcherThatStopsReadingIsCutByItsWriteDeadline: a client that stops reading before it is
// too far behind holds a write of its stream up; the write deadline, pushed forward with each
// message to the heartbeat interval plus 11 s, ends the stream, so that the server does not keep it
// for ever.
func TestAWatcherThatStopsReadingIsCutByItsWriteDeadline(t *testing.T) {
	t.Parallel() // mostly waits for write deadlines: see startProcess
	s := startServerOn(t, t.TempDir()+"/users.db", map[string]string{"USERS_ADMIN_ADDR": "127.0.0.1:0", "USERS_WATCH_HEARTBEAT": "1s"})
	admin := adminServer(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := smallWindowClient(t, s).WatchUsers(ctx, &usersv1.WatchUsersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	waitForMetric(t, admin, "usersd_watchers", nil, 1)
	// More than the window and the connection's buffers hold, less than the backlog of a watcher.
	insertUsers(t, s.dbPath, 5_000)
	start := time.Now()
	waitForMetric(t, admin, "usersd_watchers", nil, 0)
	if took := time.Since(start); took < 5*time.Second {
		t.Errorf("the stream ended %s after the changes: before its write deadline, so not by it", took)
	}
	if cut := admin.Metric(t, "usersd_watches_refused_total", map[string]string{"reason": "too_slow"}); cut != 0 {
		t.Errorf("the watch was ended as too slow (%v), not by its write deadline", cut)
	}
}

// insertUsers inserts n users into the SQLite file in one statement, behind the server's back as
// another writer would: the log's triggers record each. It waits up to three minutes for the
// writer: the server folds the kept counts of the last burst in one transaction, which under the
// race detector, beside the rest of CI's packages, held the file for more than a minute.
func insertUsers(t *testing.T, dbPath string, n int) {
	t.Helper()
	db, err := sql.Open("sqlite", dbPath+"?_pragma=busy_timeout(180000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
		INSERT INTO users (name, name_key, role, created_at, updated_at) SELECT 'bulk ' || i, 'BULK ' || i, '', 1, 1 FROM n`, n); err != nil {
		t.Fatal(err)
	}
}

// waitForMetric waits up to 30s for a series to reach want.
func waitForMetric(t *testing.T, admin *testServer, family string, labels map[string]string, want float64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := admin.Metric(t, family, labels)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s%v is %v after 30s, want %v", family, labels, got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
