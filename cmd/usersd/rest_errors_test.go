package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestRESTRejectsBadRequests sends every kind of bad request, each to its exact status with a
// {"error": ...} body, and then checks that none of them changed anything.
func TestRESTRejectsBadRequests(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			s := startServer(t)
			existing := idOf(t, s.createUser(t, "existing", "admin"))
			user := fmt.Sprintf("/users/%d", existing)
			posts := user + "/posts"
			if res := s.do(t, tr.client, request{method: "POST", path: posts, header: jsonBody, key: true, body: `{"title":"kept"}`}); res.status != 201 {
				t.Fatalf("seed post: %d %s", res.status, res.body)
			}
			before := snapshot(t, s, existing)

			const missing = "/users/999999"
			wrongKey := map[string]string{"Content-Type": "application/json", "x-api-key": "wrong-" + testKey}
			plain := map[string]string{"Content-Type": "text/plain"}
			mergePatch := map[string]string{"Content-Type": "application/merge-patch+json"}
			tooLarge := `{"name":"` + strings.Repeat("x", 1<<20) + `"}`
			cases := []struct {
				name   string
				req    request
				status int
				allow  string
			}{
				// Authentication comes before anything else about a write.
				{"a create without a key", request{method: "POST", path: "/users", header: jsonBody, body: `{"name":"x"}`}, 401, ""},
				{"a create with a wrong key", request{method: "POST", path: "/users", header: wrongKey, body: `{"name":"x"}`}, 401, ""},
				{"a create without a key and with a malformed body", request{method: "POST", path: "/users", header: jsonBody, body: `{"name":`}, 401, ""},
				{"a create without a key and with a body over the limit", request{method: "POST", path: "/users", header: jsonBody, body: tooLarge}, 401, ""},
				{"a create without a key and without a content type", request{method: "POST", path: "/users", body: `{"name":"x"}`}, 401, ""},
				{"a replace without a key", request{method: "PUT", path: user, header: jsonBody, body: `{"name":"x"}`}, 401, ""},
				{"a patch without a key", request{method: "PATCH", path: user, header: mergePatch, body: `{"name":"x"}`}, 401, ""},
				{"a delete without a key", request{method: "DELETE", path: user}, 401, ""},
				{"a delete with a wrong key", request{method: "DELETE", path: user, header: wrongKey}, 401, ""},
				{"a post without a key", request{method: "POST", path: posts, header: jsonBody, body: `{"title":"x"}`}, 401, ""},
				{"/private without a key", request{method: "GET", path: "/private"}, 401, ""},
				{"/private with a wrong key", request{method: "GET", path: "/private", header: wrongKey}, 401, ""},

				// Bodies of creates.
				{"malformed JSON", request{method: "POST", path: "/users", header: jsonBody, key: true, body: `{"name":`}, 400, ""},
				{"an unknown field", request{method: "POST", path: "/users", header: jsonBody, key: true, body: `{"name":"x","nmae":"y"}`}, 400, ""},
				{"a name of the wrong type", request{method: "POST", path: "/users", header: jsonBody, key: true, body: `{"name":5}`}, 400, ""},
				{"a role of the wrong type", request{method: "POST", path: "/users", header: jsonBody, key: true, body: `{"name":"x","role":["a"]}`}, 400, ""},
				{"a missing name", request{method: "POST", path: "/users", header: jsonBody, key: true, body: `{"role":"admin"}`}, 400, ""},
				{"an empty name", request{method: "POST", path: "/users", header: jsonBody, key: true, body: `{"name":""}`}, 400, ""},
				{"a name of spaces", request{method: "POST", path: "/users", header: jsonBody, key: true, body: `{"name":"   "}`}, 400, ""},
				{"a name of null", request{method: "POST", path: "/users", header: jsonBody, key: true, body: `{"name":null}`}, 400, ""},
				{"a name too long", request{method: "POST", path: "/users", header: jsonBody, key: true, body: `{"name":"` + strings.Repeat("é", 201) + `"}`}, 400, ""},
				{"a name with a control character", request{method: "POST", path: "/users", header: jsonBody, key: true, body: `{"name":"a\u0000b"}`}, 400, ""},
				{"a member given twice", request{method: "POST", path: "/users", header: jsonBody, key: true, body: `{"name":"a","name":"b"}`}, 400, ""},
				{"invalid UTF-8", request{method: "POST", path: "/users", header: jsonBody, key: true, body: "{\"name\":\"\xff\xfe\"}"}, 400, ""},
				{"a JSON array", request{method: "POST", path: "/users", header: jsonBody, key: true, body: `[]`}, 400, ""},
				{"JSON null", request{method: "POST", path: "/users", header: jsonBody, key: true, body: `null`}, 400, ""},
				{"an empty body", request{method: "POST", path: "/users", header: jsonBody, key: true}, 400, ""},
				{"no content type", request{method: "POST", path: "/users", key: true, body: `{"name":"x"}`}, 415, ""},
				{"a text content type", request{method: "POST", path: "/users", header: plain, key: true, body: `{"name":"x"}`}, 415, ""},
				{"a charset other than UTF-8", request{method: "POST", path: "/users", header: map[string]string{"Content-Type": "application/json; charset=latin1"}, key: true, body: `{"name":"x"}`}, 415, ""},
				{"a body over 1 MiB", request{method: "POST", path: "/users", header: jsonBody, key: true, body: tooLarge}, 413, ""},

				// Replace and patch.
				{"a replace whose body names another id", request{method: "PUT", path: user, header: jsonBody, key: true, body: fmt.Sprintf(`{"id":%d,"name":"x"}`, existing+1)}, 400, ""},
				{"a replace without a name", request{method: "PUT", path: user, header: jsonBody, key: true, body: `{"role":"x"}`}, 400, ""},
				{"a replace with a text body", request{method: "PUT", path: user, header: plain, key: true, body: `{"name":"x"}`}, 415, ""},
				{"a replace of a missing user", request{method: "PUT", path: missing, header: jsonBody, key: true, body: `{"name":"x"}`}, 404, ""},
				{"a patch that removes the name", request{method: "PATCH", path: user, header: mergePatch, key: true, body: `{"name":null}`}, 400, ""},
				{"a patch that empties the name", request{method: "PATCH", path: user, header: mergePatch, key: true, body: `{"name":""}`}, 400, ""},
				{"a patch that is an array", request{method: "PATCH", path: user, header: mergePatch, key: true, body: `[{"op":"replace"}]`}, 400, ""},
				{"a patch that is a string", request{method: "PATCH", path: user, header: mergePatch, key: true, body: `"x"`}, 400, ""},
				{"a patch with an unknown member", request{method: "PATCH", path: user, header: mergePatch, key: true, body: `{"bogus":1}`}, 400, ""},
				{"a patch whose body names another id", request{method: "PATCH", path: user, header: mergePatch, key: true, body: fmt.Sprintf(`{"id":%d}`, existing+1)}, 400, ""},
				{"a patch as JSON Patch", request{method: "PATCH", path: user, header: map[string]string{"Content-Type": "application/json-patch+json"}, key: true, body: `[]`}, 415, ""},
				{"a patch of a missing user", request{method: "PATCH", path: missing, header: mergePatch, key: true, body: `{"role":"x"}`}, 404, ""},
				{"a delete of a missing user", request{method: "DELETE", path: missing, key: true}, 404, ""},

				// Posts.
				{"a post without a title", request{method: "POST", path: posts, header: jsonBody, key: true, body: `{"body":"b"}`}, 400, ""},
				{"a post for another user", request{method: "POST", path: posts, header: jsonBody, key: true, body: fmt.Sprintf(`{"title":"t","userId":%d}`, existing+1)}, 400, ""},
				{"a post with a body of the wrong type", request{method: "POST", path: posts, header: jsonBody, key: true, body: `{"title":"t","body":5}`}, 400, ""},
				{"a post for a missing user", request{method: "POST", path: missing + "/posts", header: jsonBody, key: true, body: `{"title":"t"}`}, 404, ""},

				// Ids in the path.
				{"a word as id", request{method: "GET", path: "/users/abc"}, 400, ""},
				{"id zero", request{method: "GET", path: "/users/0"}, 400, ""},
				{"a negative id", request{method: "GET", path: "/users/-1"}, 400, ""},
				{"a fractional id", request{method: "GET", path: "/users/1.5"}, 400, ""},
				{"an id past int32", request{method: "GET", path: "/users/2147483648"}, 400, ""},
				{"a word as id of posts", request{method: "GET", path: "/users/abc/posts"}, 400, ""},
				{"a delete with a word as id", request{method: "DELETE", path: "/users/abc", key: true}, 400, ""},
				{"a missing user", request{method: "GET", path: missing}, 404, ""},

				// Routes.
				{"an unknown path", request{method: "GET", path: "/nope"}, 404, ""},
				{"an unknown path with POST", request{method: "POST", path: "/nope", header: jsonBody, body: `{}`}, 404, ""},
				{"an unknown path with DELETE", request{method: "DELETE", path: "/nope"}, 404, ""},
				{"an unknown subresource", request{method: "GET", path: user + "/comments"}, 404, ""},
				{"a verb route", request{method: "POST", path: "/users/create", header: jsonBody, key: true, body: `{"name":"x"}`}, 405, "DELETE, GET, HEAD, PATCH, PUT"},
				{"PUT on the collection", request{method: "PUT", path: "/users", header: jsonBody, key: true, body: `{"name":"x"}`}, 405, "GET, HEAD, POST"},
				{"POST on a user", request{method: "POST", path: user, header: jsonBody, key: true, body: `{"name":"x"}`}, 405, "DELETE, GET, HEAD, PATCH, PUT"},
				{"DELETE on posts", request{method: "DELETE", path: posts, key: true}, 405, "GET, HEAD, POST"},
				{"DELETE on /health", request{method: "DELETE", path: "/health"}, 405, "GET, HEAD"},
				{"GET on /echo", request{method: "GET", path: "/echo"}, 405, "POST"},
				{"POST on a static file", request{method: "POST", path: "/index.html"}, 405, "GET, HEAD"},

				// The public echo.
				{"an echo of malformed JSON", request{method: "POST", path: "/echo", header: jsonBody, body: `{"a":`}, 400, ""},
				{"an echo of text", request{method: "POST", path: "/echo", header: plain, body: `hello`}, 415, ""},
			}
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					res := s.do(t, tr.client, c.req)
					if res.status != c.status {
						t.Fatalf("%s %s: %d %s, want %d", c.req.method, c.req.path, res.status, res.body, c.status)
					}
					res.errorMessage(t)
					if res.header.Get("Content-Type") != "application/json" {
						t.Errorf("Content-Type %q", res.header.Get("Content-Type"))
					}
					if got := res.header.Get("Allow"); got != c.allow {
						t.Errorf("Allow %q, want %q", got, c.allow)
					}
				})
			}

			if after := snapshot(t, s, existing); after != before {
				t.Fatalf("rejected requests changed the store:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

// snapshot reads everything a client can see of the users and of one user's posts.
func snapshot(t *testing.T, s *testServer, userID int) string {
	t.Helper()
	users := s.do(t, http1Client, request{method: "GET", path: "/users?limit=100"})
	posts := s.do(t, http1Client, request{method: "GET", path: fmt.Sprintf("/users/%d/posts?limit=100", userID)})
	if users.status != http.StatusOK || posts.status != http.StatusOK {
		t.Fatalf("snapshot: users %d, posts %d", users.status, posts.status)
	}
	return string(users.body) + " " + users.header.Get("X-Total-Count") + " | " + string(posts.body)
}
