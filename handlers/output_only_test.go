package handlers

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"usersd/internal/apitest"
)

// outputOnlyJunk is every output-only member of a user with a value no user has: each is ignored
// (AIP-203), so a client may send back what it read, or anything, in a field the server sets. The
// etag member is spelt with an escape, which protojson reads as the name it spells.
const outputOnlyJunk = `"createdAt":"","updatedAt":{"seconds":1},"\u0065tag":42`

// TestRESTWritesIgnoreOutputOnlyMembersWhateverTheirValue sends every REST write with output-only
// members whose values protojson cannot read, and wants them ignored, as the document says
// (readOnly): only the fields the request compares with its path (a user's id on PUT and PATCH, a
// post's userId) must still be right, and everything else in the body is still judged strictly.
func TestRESTWritesIgnoreOutputOnlyMembersWhateverTheirValue(t *testing.T) {
	s := startServer(t)
	c := apitest.HTTP1Client
	mergePatch := map[string]string{"Content-Type": "application/merge-patch+json"}

	created := s.Do(t, c, request{Method: "POST", Path: "/users", Header: apitest.JSONBody, Key: true,
		Body: `{"name":"Ada","id":"not an id",` + outputOnlyJunk + `}`})
	if created.Status != http.StatusCreated {
		t.Fatalf("create with junk in output-only members: %d %s, want 201", created.Status, created.Body)
	}
	user := apitest.DecodeObject(t, created.Body)
	id := apitest.IDOf(t, user)
	if user["name"] != "Ada" || user["etag"] != `"1"` || user["createdAt"] == "" || user["createdAt"] != user["updatedAt"] {
		t.Fatalf("created %v: want the name sent, and the id, times and etag of the server", user)
	}
	path := fmt.Sprintf("/users/%d", id)

	for _, tc := range []struct {
		name   string
		req    request
		wantOK int
		want   string // a member of the answer that shows the write happened
	}{
		{"PUT", request{Method: "PUT", Path: path, Header: apitest.JSONBody, Key: true,
			Body: fmt.Sprintf(`{"id":%d,"name":"Ada King",%s}`, id, outputOnlyJunk)}, http.StatusOK, `"name":"Ada King"`},
		{"PATCH as a merge patch", request{Method: "PATCH", Path: path, Header: mergePatch, Key: true,
			Body: `{` + outputOnlyJunk + `,"role":"countess"}`}, http.StatusOK, `"role":"countess"`},
		{"PATCH as JSON", request{Method: "PATCH", Path: path, Header: apitest.JSONBody, Key: true,
			Body: `{"role":"admin", ` + outputOnlyJunk + ` }`}, http.StatusOK, `"role":"admin"`},
		{"POST a post", request{Method: "POST", Path: path + "/posts", Header: apitest.JSONBody, Key: true,
			Body: fmt.Sprintf(`{"id":"x","userId":%d,"title":"Notes","createdAt":"yesterday"}`, id)}, http.StatusCreated, `"title":"Notes"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := s.Do(t, c, tc.req)
			if res.Status != tc.wantOK || !strings.Contains(string(res.Body), tc.want) {
				t.Fatalf("%d %s, want %d with %s", res.Status, res.Body, tc.wantOK, tc.want)
			}
			got := apitest.DecodeObject(t, res.Body)
			if got["createdAt"] == "" || got["createdAt"] == "yesterday" {
				t.Fatalf("answered %v: createdAt must be the server's", got)
			}
		})
	}
	if got := apitest.DecodeObject(t, s.Do(t, c, request{Method: "GET", Path: path}).Body); got["createdAt"] != user["createdAt"] || got["etag"] != `"4"` {
		t.Fatalf("after the writes the user is %v: want its first createdAt and etag \"4\"", got)
	}

	// What the request compares with its path, and every member that is not output only, is
	// still refused when it is wrong; so are duplicates and trailing data around ignored members.
	for _, tc := range []struct{ name, method, path, contentType, body, want string }{
		{"an id that is not the path's", "PUT", path, "application/json", `{"id":2147483647,"name":"x","createdAt":""}`, "does not match"},
		{"an id that is not a number", "PATCH", path, "application/json", `{"id":"x","createdAt":""}`, "id"},
		{"a userId that is not the path's", "POST", path + "/posts", "application/json", `{"userId":2147483647,"title":"x","createdAt":""}`, "does not match"},
		{"a name of the wrong type", "POST", "/users", "application/json", `{"name":5,"createdAt":""}`, "name"},
		{"a duplicate name", "POST", "/users", "application/json", `{"name":"a","createdAt":"","name":"b"}`, "duplicate"},
		{"trailing data", "PATCH", path, "application/merge-patch+json", `{"etag":"","role":"x"} {}`, "invalid"},
		{"an unknown member", "POST", "/users", "application/json", `{"name":"a","createdAt":"","nickname":"b"}`, "nickname"},
	} {
		t.Run("refuses "+tc.name, func(t *testing.T) {
			res := s.Do(t, c, request{Method: tc.method, Path: tc.path, Header: map[string]string{"Content-Type": tc.contentType}, Key: true, Body: tc.body})
			if res.Status != http.StatusBadRequest || !strings.Contains(res.ErrorMessage(t), tc.want) {
				t.Fatalf("%s %s %s: %d %s, want 400 naming %q", tc.method, tc.path, tc.body, res.Status, res.Body, tc.want)
			}
		})
	}
}
