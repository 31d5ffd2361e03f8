package handlers

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	usersv1 "usersd/gen/users/v1"
	"usersd/gen/users/v1/usersv1connect"
	"usersd/internal/apitest"
)

// softDeleteRetention is the retention of the servers here: long enough that nothing is purged
// while a test runs, so that each purge is the test's own.
const softDeleteRetention = time.Hour

// aboutRetention reports whether d, from a user's delete time to its purge time, is the retention:
// the service reads the clock for the purge time just before the store reads it for the delete.
func aboutRetention(d time.Duration) bool {
	return d > softDeleteRetention-time.Second && d <= softDeleteRetention
}

// TestSoftDeleteOverREST: a deleted user is 404 to reads, writes and its posts, left out of lists
// and totals, shown with both times to showDeleted, restored by :undelete, and removed for good by
// purge=true; a second delete and an undelete of a live user are 404.
func TestSoftDeleteOverREST(t *testing.T) {
	s := startServerWith(t, Config{DeletedRetention: softDeleteRetention})
	do := func(method, path, body string) response {
		header := map[string]string{}
		if body != "" {
			header = apitest.JSONBody
		}
		return s.Do(t, apitest.HTTP1Client, request{Method: method, Path: path, Header: header, Key: true, Body: body})
	}
	created := do("POST", "/users", `{"name":"Ada","userName":"ada"}`)
	id := apitest.IDOf(t, apitest.DecodeObject(t, created.Body))
	path := fmt.Sprintf("/users/%d", id)
	do("POST", path+"/posts", `{"title":"t","body":"b"}`)
	do("POST", "/users", `{"name":"Bob"}`)

	before := time.Now()
	if res := do("DELETE", path, ""); res.Status != http.StatusNoContent {
		t.Fatalf("DELETE: %d %s", res.Status, res.Body)
	}
	for _, probe := range []struct{ method, path, body string }{
		{"GET", path, ""}, {"PATCH", path, `{"role":"x"}`}, {"PUT", path, `{"name":"Ada"}`}, {"DELETE", path, ""},
		{"GET", path + "/posts", ""}, {"POST", path + "/posts", `{"title":"t","body":"b"}`},
	} {
		if res := do(probe.method, probe.path, probe.body); res.Status != http.StatusNotFound || res.ErrorReason(t) != "USER_NOT_FOUND" {
			t.Errorf("%s %s of a deleted user: %d %s; want 404 USER_NOT_FOUND", probe.method, probe.path, res.Status, res.Body)
		}
	}
	if list := do("GET", "/users", ""); strings.Contains(string(list.Body), `"Ada"`) || list.Header.Get("X-Total-Count") != "1" {
		t.Errorf("the list without deleted users: total %s, %s", list.Header.Get("X-Total-Count"), list.Body)
	}
	shown := do("GET", "/users?showDeleted=true", "")
	if !strings.Contains(string(shown.Body), `"Ada"`) || shown.Header.Get("X-Total-Count") != "2" {
		t.Errorf("the list with deleted users: total %s, %s", shown.Header.Get("X-Total-Count"), shown.Body)
	}
	deleted := do("GET", path+"?showDeleted=true", "")
	user := apitest.DecodeObject(t, deleted.Body)
	deleteTime, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(user["deleteTime"]))
	purgeTime, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(user["purgeTime"]))
	if deleted.Status != http.StatusOK || deleteTime.Before(before.Add(-time.Second)) || !aboutRetention(purgeTime.Sub(deleteTime)) {
		t.Errorf("GET showDeleted: %d %s; want the user with its delete time and a purge time the retention later", deleted.Status, deleted.Body)
	}
	for _, bad := range []string{path + "?showDeleted=maybe", path + "?showDeleted=%zz", "/users?showDeleted=yes"} {
		if res := do("GET", bad, ""); res.Status != http.StatusBadRequest {
			t.Errorf("GET %s: %d %s; want 400", bad, res.Status, res.Body)
		}
	}
	// Where reads are public, deleted users are shown only to a caller with a credential.
	for _, anonymous := range []string{path + "?showDeleted=true", "/users?showDeleted=true"} {
		if res := s.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: anonymous}); res.Status != http.StatusUnauthorized {
			t.Errorf("GET %s without a key: %d %s; want 401", anonymous, res.Status, res.Body)
		}
	}
	// A new user cannot take the deleted user's login name: the deleted user may come back.
	if res := do("POST", "/users", `{"name":"Ada 2","userName":"ADA"}`); res.Status != http.StatusConflict {
		t.Errorf("a create with the deleted user's login name: %d %s; want 409", res.Status, res.Body)
	}

	restored := do("POST", path+":undelete", "")
	if restored.Status != http.StatusOK || strings.Contains(string(restored.Body), "deleteTime") || restored.Header.Get("ETag") == "" {
		t.Fatalf("undelete: %d %s", restored.Status, restored.Body)
	}
	if res := do("GET", path+"/posts", ""); res.Header.Get("X-Total-Count") != "1" {
		t.Errorf("the restored user's posts: %d %s", res.Status, res.Body)
	}
	if res := do("POST", path+":undelete", ""); res.Status != http.StatusNotFound {
		t.Errorf("undelete of a live user: %d %s; want 404", res.Status, res.Body)
	}
	if res := do("POST", path+":restore", ""); res.Status != http.StatusMethodNotAllowed && res.Status != http.StatusNotFound {
		t.Errorf("an unknown custom method: %d %s", res.Status, res.Body)
	}
	for _, method := range []string{"GET", "PUT", "PATCH", "DELETE"} {
		if res := do(method, path+":undelete", ""); res.Status != http.StatusMethodNotAllowed || res.Header.Get("Allow") != "POST" {
			t.Errorf("%s on the undelete method: %d %s (Allow %q); want 405, Allow: POST", method, res.Status, res.Body, res.Header.Get("Allow"))
		}
	}
	if res := do("POST", path, ""); res.Status != http.StatusMethodNotAllowed || !strings.Contains(res.Header.Get("Allow"), "DELETE") {
		t.Errorf("POST on a user without a custom method: %d %s (Allow %q); want 405 as before", res.Status, res.Body, res.Header.Get("Allow"))
	}

	// Purge: at once, of a live user and of a deleted one. A malformed purge is refused, never
	// taken for a plain delete.
	if res := do("DELETE", path+"?purge=tru%e", ""); res.Status != http.StatusBadRequest {
		t.Errorf("DELETE ?purge=tru%%e: %d %s; want 400", res.Status, res.Body)
	}
	do("DELETE", path, "")
	if res := do("DELETE", path+"?purge=true", ""); res.Status != http.StatusNoContent {
		t.Fatalf("purge of a deleted user: %d %s", res.Status, res.Body)
	}
	if res := do("GET", path+"?showDeleted=true", ""); res.Status != http.StatusNotFound {
		t.Errorf("GET showDeleted after the purge: %d %s; want 404", res.Status, res.Body)
	}
	if res := do("GET", "/users?showDeleted=true", ""); res.Status != http.StatusOK || strings.Contains(string(res.Body), `"Ada"`) {
		t.Errorf("the list with deleted users after the purge: %d %s", res.Status, res.Body)
	}
	if res := do("POST", path+":undelete", ""); res.Status != http.StatusNotFound {
		t.Errorf("undelete of a purged user: %d %s; want 404", res.Status, res.Body)
	}
	if res := do("POST", "/users", `{"name":"Ada 2","userName":"ADA"}`); res.Status != http.StatusCreated {
		t.Errorf("a create with a purged user's login name: %d %s; want 201", res.Status, res.Body)
	}
}

// TestSoftDeleteOverRPC: the same on every RPC protocol, with DeleteUser answering the deleted
// user, show_deleted in lists, UndeleteUser, and purge.
func TestSoftDeleteOverRPC(t *testing.T) {
	s := startServerWith(t, Config{DeletedRetention: softDeleteRetention})
	for _, p := range apitest.RPCProtocols {
		t.Run(p.Name, func(t *testing.T) {
			c := s.RPCClient(p, apitest.Key)
			ctx := t.Context()
			user := apitest.RPCCreate(t, c, "Ada "+p.Name, "")
			res, err := c.DeleteUser(ctx, &usersv1.DeleteUserRequest{Id: user.GetId()})
			apitest.RPCMust(t, "DeleteUser", err)
			gone := res.GetUser()
			if gone.GetDeleteTime() == nil || !aboutRetention(gone.GetPurgeTime().AsTime().Sub(gone.GetDeleteTime().AsTime())) || gone.GetEtag() == user.GetEtag() {
				t.Fatalf("DeleteUser answered %v; want the user as deleted, with both times and a new etag", gone)
			}
			if _, err := c.GetUser(ctx, &usersv1.GetUserRequest{Id: user.GetId()}); connect.CodeOf(err) != connect.CodeNotFound {
				t.Errorf("GetUser of a deleted user: %v", err)
			}
			if _, err := c.DeleteUser(ctx, &usersv1.DeleteUserRequest{Id: user.GetId()}); connect.CodeOf(err) != connect.CodeNotFound {
				t.Errorf("a second DeleteUser: %v", err)
			}
			if found := listsUser(t, c, user.GetId(), false); found {
				t.Error("ListUsers shows a deleted user without show_deleted")
			}
			if found := listsUser(t, c, user.GetId(), true); !found {
				t.Error("ListUsers with show_deleted leaves the deleted user out")
			}
			back, err := c.UndeleteUser(ctx, &usersv1.UndeleteUserRequest{Id: user.GetId(), Etag: gone.GetEtag()})
			apitest.RPCMust(t, "UndeleteUser", err)
			if back.GetDeleteTime() != nil || back.GetPurgeTime() != nil || back.GetName() != user.GetName() {
				t.Errorf("UndeleteUser answered %v", back)
			}
			if _, err := c.UndeleteUser(ctx, &usersv1.UndeleteUserRequest{Id: user.GetId()}); connect.CodeOf(err) != connect.CodeNotFound {
				t.Errorf("UndeleteUser of a live user: %v", err)
			}
			purged, err := c.DeleteUser(ctx, &usersv1.DeleteUserRequest{Id: user.GetId(), Purge: true})
			apitest.RPCMust(t, "DeleteUser with purge", err)
			if purged.GetUser() != nil {
				t.Errorf("a purge answered %v; want no user", purged.GetUser())
			}
			if found := listsUser(t, c, user.GetId(), true); found {
				t.Error("ListUsers with show_deleted shows a purged user")
			}
			anonymous := s.RPCClient(p, "")
			if _, err := anonymous.ListUsers(ctx, &usersv1.ListUsersRequest{ShowDeleted: true}); connect.CodeOf(err) != connect.CodeUnauthenticated {
				t.Errorf("ListUsers with show_deleted and no credential: %v; want unauthenticated", err)
			}
		})
	}
}

// listsUser reports whether ListUsers (with or without deleted users) holds the user.
func listsUser(t *testing.T, c usersv1connect.UsersClient, id int32, showDeleted bool) bool {
	t.Helper()
	res, err := c.ListUsers(t.Context(), &usersv1.ListUsersRequest{Limit: 100, ShowDeleted: showDeleted})
	apitest.RPCMust(t, "ListUsers", err)
	for _, u := range res.GetUsers() {
		if u.GetId() == id {
			return true
		}
	}
	return false
}

// TestTheFeedTellsDeletesUndeletesAndPurges: every way of watching sees a soft delete as
// KIND_DELETED with the user as deleted, the restore as KIND_UNDELETED, and the purge as
// KIND_PURGED with the id alone.
func TestTheFeedTellsDeletesUndeletesAndPurges(t *testing.T) {
	s := startServerWith(t, Config{DeletedRetention: softDeleteRetention})
	var watches []*apitest.WatchStream
	protocols := apitest.WatchProtocols()
	for _, p := range protocols {
		watches = append(watches, apitest.StartWatch(t, s.Server, p, 0, ""))
	}
	created := s.Do(t, apitest.HTTP1Client, request{Method: "POST", Path: "/users", Header: apitest.JSONBody, Key: true, Body: `{"name":"Ada"}`})
	path := fmt.Sprintf("/users/%d", apitest.IDOf(t, apitest.DecodeObject(t, created.Body)))
	for _, w := range watches {
		w.Next(t, 10*time.Second) // the create
	}
	// Each step is read by every watch before the next: a purge takes the name out of the user's
	// earlier changes too, so a watch that read them after it would see the id alone.
	for _, step := range []struct {
		request
		check func(e *usersv1.UserEvent) bool
	}{
		{request{Method: "DELETE", Path: path, Key: true}, func(e *usersv1.UserEvent) bool {
			return e.GetKind() == usersv1.UserEvent_KIND_DELETED && e.GetUser().GetDeleteTime() != nil && e.GetUser().GetName() == "Ada"
		}},
		{request{Method: "POST", Path: path + ":undelete", Key: true}, func(e *usersv1.UserEvent) bool {
			return e.GetKind() == usersv1.UserEvent_KIND_UNDELETED && e.GetUser().GetDeleteTime() == nil && e.GetUser().GetName() == "Ada"
		}},
		{request{Method: "DELETE", Path: path + "?purge=true", Key: true}, func(e *usersv1.UserEvent) bool {
			return e.GetKind() == usersv1.UserEvent_KIND_PURGED && e.GetUser().GetName() == "" && e.GetUser().GetId() != 0
		}},
	} {
		if res := s.Do(t, apitest.HTTP1Client, step.request); res.Status >= 300 {
			t.Fatalf("%s %s: %d %s", step.Method, step.Path, res.Status, res.Body)
		}
		for i, w := range watches {
			if e := w.Next(t, 10*time.Second); !step.check(e.UserEvent) {
				t.Errorf("%s: %s %s came as %v", protocols[i].Name, step.Method, step.Path, e.UserEvent)
			}
		}
	}
}
