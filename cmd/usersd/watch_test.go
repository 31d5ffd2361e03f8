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
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	usersv1 "usersd/gen/users/v1"
	"usersd/gen/users/v1/usersv1connect"
	"usersd/internal/apitest"
	"usersd/store"
	"usersd/store/sqlstore"
)

// TestAWatchSeesEveryChangeOnEveryProtocol: a create over REST, an update over RPC and a delete
// reach a watcher on each protocol, in order, as exactly those changes; a user in an event is the
// user that a read answers, byte for byte on SSE, whose data is Connect's JSON.
func TestAWatchSeesEveryChangeOnEveryProtocol(t *testing.T) {
	s := startServer(t)
	for _, p := range apitest.WatchProtocols() {
		t.Run(p.Name, func(t *testing.T) {
			w := apitest.StartWatch(t, s.Server, p, -1, "")
			created := s.CreateUser(t, "watched "+p.Name, "admin")
			id := apitest.UserID(t, created)
			renamed := "renamed " + p.Name
			_, err := s.RPCClient(apitest.RPCProtocolNamed(t, "gRPC"), apitest.Key).UpdateUser(context.Background(), &usersv1.UpdateUserRequest{
				Id: id, User: &usersv1.User{Name: renamed}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"name"}}})
			if err != nil {
				t.Fatal(err)
			}
			read := s.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: fmt.Sprintf("/users/%d", id)})
			s.DeleteUser(t, id)
			got := w.WantChanges(t,
				apitest.Change{Kind: usersv1.UserEvent_KIND_CREATED, ID: id, Name: "watched " + p.Name},
				apitest.Change{Kind: usersv1.UserEvent_KIND_UPDATED, ID: id, Name: renamed},
				apitest.Change{Kind: usersv1.UserEvent_KIND_DELETED, ID: id, Name: ""})
			if role := got[1].GetUser().GetRole(); role != "admin" || got[1].GetUser().GetEtag() != `"2"` {
				t.Errorf("the update's user has role %q and etag %s, want the whole user at version 2", role, got[1].GetUser().GetEtag())
			}
			if p.SSE != nil && !strings.Contains(got[1].Data, `"user":`+string(read.Body)+`}`) {
				t.Errorf("the update's data %s does not hold the user as GET answers it: %s", got[1].Data, read.Body)
			}
			w.Quiet(t, 300*time.Millisecond)
		})
	}
}

// TestAWatchOfOneRoleSeesItsUsersComeAndGo: with a role, a watch sees the changes of users that
// have the role, or had it before an update, and no other.
func TestAWatchOfOneRoleSeesItsUsersComeAndGo(t *testing.T) {
	s := startServer(t)
	for _, p := range []apitest.WatchProtocol{apitest.WatchProtocols()[0], apitest.WatchProtocols()[4]} {
		t.Run(p.Name, func(t *testing.T) {
			w := apitest.StartWatch(t, s.Server, p, -1, "editor")
			other := apitest.UserID(t, s.CreateUser(t, "viewer", "viewer"))
			editor := apitest.UserID(t, s.CreateUser(t, "editor", "editor"))
			res := s.Do(t, apitest.HTTP1Client, request{Method: "PATCH", Path: fmt.Sprintf("/users/%d", editor), Key: true,
				Header: map[string]string{"Content-Type": "application/merge-patch+json"}, Body: `{"role":"viewer"}`})
			if res.Status != http.StatusOK {
				t.Fatalf("patch: %d %s", res.Status, res.Body)
			}
			s.DeleteUser(t, other)
			s.DeleteUser(t, editor) // a viewer by now
			got := w.WantChanges(t, apitest.Change{Kind: usersv1.UserEvent_KIND_CREATED, ID: editor, Name: "editor"}, apitest.Change{Kind: usersv1.UserEvent_KIND_UPDATED, ID: editor, Name: "editor"})
			if got[1].GetUser().GetRole() != "viewer" {
				t.Errorf("the update shows role %q, want the new role", got[1].GetUser().GetRole())
			}
			w.Quiet(t, 300*time.Millisecond)
		})
	}
}

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

// TestAWatchRefusesAResumeItCannotServe: a resume point older than the kept log, or newer than any
// change, is FAILED_PRECONDITION on RPC and 410 on REST, before the stream starts, so a client
// knows to reload; a malformed one is INVALID_ARGUMENT / 400.
func TestAWatchRefusesAResumeItCannotServe(t *testing.T) {
	s := startServer(t)
	for range 3 {
		s.CreateUser(t, "soon swept", "")
	}
	for _, p := range apitest.WatchProtocols() {
		_, err := apitest.OpenWatch(t, s.Server, p, 1000, "")
		apitest.WantWatchCode(t, p, err, connect.CodeFailedPrecondition, http.StatusGone)
	}
	// What the sweeper does a day later: the server reads the same file.
	later, err := sqlstore.Open(context.Background(), s.dbPath, sqlstore.WithClock(func() time.Time { return time.Now().Add(25 * time.Hour) }))
	if err != nil {
		t.Fatal(err)
	}
	defer later.Close()
	if n, err := later.DeleteExpiredUserEvents(context.Background(), 100); n != 3 || err != nil {
		t.Fatalf("sweep: %d, %v; want 3 changes deleted", n, err)
	}
	for _, p := range apitest.WatchProtocols() {
		t.Run(p.Name, func(t *testing.T) {
			for _, after := range []int64{0, 2} {
				_, err := apitest.OpenWatch(t, s.Server, p, after, "")
				apitest.WantWatchCode(t, p, err, connect.CodeFailedPrecondition, http.StatusGone)
			}
			apitest.StartWatch(t, s.Server, p, 3, "").Quiet(t, 50*time.Millisecond) // from the last swept change on, nothing is missing
		})
	}
	for _, query := range []string{"afterSequence=-1", "afterSequence=x", "after=1", "role=" + strings.Repeat("r", 65)} {
		if res := s.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: "/users/events?" + query}); res.Status != http.StatusBadRequest {
			t.Errorf("GET /users/events?%s: %d %s, want 400", query, res.Status, res.Body)
		}
	}
	if res := s.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: "/users/events", Header: map[string]string{"Last-Event-ID": "seven"}}); res.Status != http.StatusBadRequest {
		t.Errorf("Last-Event-ID: seven: %d %s, want 400", res.Status, res.Body)
	}
	_, err = apitest.OpenWatch(t, s.Server, apitest.WatchProtocols()[0], -1, strings.Repeat("r", 65))
	apitest.RPCWantCode(t, err, connect.CodeInvalidArgument)
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
// and an error event on SSE, and the server stops well within its grace.
func TestWatchesEndCleanlyWhenTheServerStops(t *testing.T) {
	s := startServerOn(t, t.TempDir()+"/users.db", map[string]string{"USERS_SHUTDOWN_GRACE": "30s"})
	var watches []*apitest.WatchStream
	for _, p := range apitest.WatchProtocols() {
		watches = append(watches, apitest.StartWatch(t, s.Server, p, -1, ""))
	}
	start := time.Now()
	s.stop() // fails the test if run returns an error
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("stopping with open watches took %s", took)
	}
	for i, w := range watches {
		apitest.WantWatchCode(t, apitest.WatchProtocols()[i], w.Ended(t, 5*time.Second), connect.CodeUnavailable, 0)
	}
}

// TestTheWatcherLimitRefusesTheWatchOverIt: -max-watchers caps the open watches, RESOURCE_EXHAUSTED
// on RPC and 429 on REST for the one over it, and a watch that ends frees its place.
func TestTheWatcherLimitRefusesTheWatchOverIt(t *testing.T) {
	s := startServerOn(t, t.TempDir()+"/users.db", map[string]string{"USERS_MAX_WATCHERS": "2"})
	first := apitest.StartWatch(t, s.Server, apitest.WatchProtocols()[0], -1, "")
	apitest.StartWatch(t, s.Server, apitest.WatchProtocols()[4], -1, "")
	for _, p := range apitest.WatchProtocols() {
		_, err := apitest.OpenWatch(t, s.Server, p, -1, "")
		apitest.WantWatchCode(t, p, err, connect.CodeResourceExhausted, http.StatusTooManyRequests)
	}
	first.Cancel()
	deadline := time.Now().Add(5 * time.Second)
	for {
		w, err := apitest.OpenWatch(t, s.Server, apitest.WatchProtocols()[2], -1, "")
		if err == nil {
			w.Cancel()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a place did not come free after a watch ended: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
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
			cut := metricValue(t, admin, "usersd_watches_refused_total", map[string]string{"reason": "too_slow"})
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
	if cut := metricValue(t, admin, "usersd_watches_refused_total", map[string]string{"reason": "too_slow"}); cut != 0 {
		t.Errorf("the watch was ended as too slow (%v), not by its write deadline", cut)
	}
}

// insertUsers inserts n users into the SQLite file in one statement, behind the server's back as
// another writer would: the log's triggers record each.
func insertUsers(t *testing.T, dbPath string, n int) {
	t.Helper()
	db, err := sql.Open("sqlite", dbPath+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
		INSERT INTO users (name, name_key, role, created_at, updated_at) SELECT 'bulk ' || i, 'BULK ' || i, '', 1, 1 FROM n`, n); err != nil {
		t.Fatal(err)
	}
}

func metricValue(t *testing.T, admin *testServer, family string, labels map[string]string) float64 {
	t.Helper()
	v, _ := sample(scrape(t, admin), family, labels)
	return v
}

// waitForMetric waits up to 30s for a series to reach want.
func waitForMetric(t *testing.T, admin *testServer, family string, labels map[string]string, want float64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := metricValue(t, admin, family, labels)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s%v is %v after 30s, want %v", family, labels, got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
