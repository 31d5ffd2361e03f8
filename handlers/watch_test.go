package handlers

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	usersv1 "usersd/gen/users/v1"
	"usersd/internal/apitest"
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
			// The delete waits for the first two changes: this server keeps no deleted users, so a
			// delete forgets the user's names in the log too, and a watcher that read the update
			// only after it would rightly see the update without them.
			got := w.WantChanges(t,
				apitest.Change{Kind: usersv1.UserEvent_KIND_CREATED, ID: id, Name: "watched " + p.Name},
				apitest.Change{Kind: usersv1.UserEvent_KIND_UPDATED, ID: id, Name: renamed})
			s.DeleteUser(t, id)
			if deleted := w.WantChanges(t, apitest.Change{Kind: usersv1.UserEvent_KIND_DELETED, ID: id, Name: ""}); deleted[0].GetSequence() <= got[1].GetSequence() {
				t.Errorf("the delete has sequence %d after the update's %d", deleted[0].GetSequence(), got[1].GetSequence())
			}
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
			// The deletes wait for the changes the watch must see: this server keeps no deleted
			// users, so a delete forgets the user's name in the log too.
			got := w.WantChanges(t, apitest.Change{Kind: usersv1.UserEvent_KIND_CREATED, ID: editor, Name: "editor"}, apitest.Change{Kind: usersv1.UserEvent_KIND_UPDATED, ID: editor, Name: "editor"})
			if got[1].GetUser().GetRole() != "viewer" {
				t.Errorf("the update shows role %q, want the new role", got[1].GetUser().GetRole())
			}
			s.DeleteUser(t, other)
			s.DeleteUser(t, editor) // a viewer by now
			w.Quiet(t, 300*time.Millisecond)
		})
	}
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

// TestTheWatcherLimitRefusesTheWatchOverIt: -max-watchers caps the open watches, RESOURCE_EXHAUSTED
// on RPC and 429 on REST for the one over it, and a watch that ends frees its place.
func TestTheWatcherLimitRefusesTheWatchOverIt(t *testing.T) {
	s := startServerWith(t, Config{MaxWatchers: 2})
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

func TestAnEventStreamSpreadsItsReconnectionDelay(t *testing.T) {
	s := startServer(t)
	delays := map[int]bool{}
	for range 5 {
		ctx, cancel := context.WithCancel(t.Context())
		req, _ := http.NewRequestWithContext(ctx, "GET", s.BaseURL+"/users/events", nil)
		res, err := apitest.HTTP1Client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(res.Body).ReadString('\n')
		cancel()
		res.Body.Close()
		ms, ok := strings.CutPrefix(strings.TrimSpace(line), "retry: ")
		delay, convErr := strconv.Atoi(ms)
		if err != nil || !ok || convErr != nil || delay < 1000 || delay >= 4000 {
			t.Fatalf("the stream starts with %q (%v); want a retry of 1 to 4 s", line, err)
		}
		delays[delay] = true
	}
	if len(delays) < 2 {
		t.Errorf("five streams gave the same reconnection delay %v: it is not spread", delays)
	}
}

func TestOneClientCannotTakeEveryWatch(t *testing.T) {
	s := startServerWith(t, Config{WatchersPerConnection: 2, WatchersPerAddress: 3})
	sse := func(client *http.Client) apitest.WatchProtocol {
		return apitest.WatchProtocol{Name: "SSE", SSE: client}
	}
	refused := func(what string, err error) {
		t.Helper()
		var refusal apitest.SSERefusal
		if !errors.As(err, &refusal) || refusal.Status != http.StatusTooManyRequests {
			t.Fatalf("%s: %v, want 429", what, err)
		}
	}
	// One HTTP/2 connection carries two watches, not a third.
	first := apitest.NewH2CClient()
	apitest.StartWatch(t, s.Server, sse(first), -1, "")
	last := apitest.StartWatch(t, s.Server, sse(first), -1, "")
	_, err := apitest.OpenWatch(t, s.Server, sse(first), -1, "")
	refused("a third watch on one connection", err)
	// Another connection from the same address gets the address's third, not a fourth.
	second := apitest.NewH2CClient()
	apitest.StartWatch(t, s.Server, sse(second), -1, "")
	_, err = apitest.OpenWatch(t, s.Server, sse(second), -1, "")
	refused("a fourth watch from one address", err)
	// A watch that ends gives its slot back (once its handler has returned, a moment later), and
	// RPC watches count the same: the address's third is one, and a fourth is refused.
	last.Cancel()
	rpc := apitest.WatchProtocols()[0]
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := apitest.OpenWatch(t, s.Server, rpc, -1, "")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a slot was not given back 5 s after its watch ended: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	_, err = apitest.OpenWatch(t, s.Server, rpc, -1, "")
	if connect.CodeOf(err) != connect.CodeResourceExhausted {
		t.Fatalf("an RPC watch past the address's cap: %v, want resource_exhausted", err)
	}
}
