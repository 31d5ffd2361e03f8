package handlers

import (
	"fmt"
	"strings"
	"testing"

	"usersd/internal/apitest"
)

// TestRESTRejectsBadRequests sends every kind of bad request, each to its exact status with a
// {"error": ...} body, and then checks that none of them changed anything.
func TestRESTRejectsBadRequests(t *testing.T) {
	for _, tr := range apitest.Transports {
		t.Run(tr.Name, func(t *testing.T) {
			s := startServer(t)
			existing := apitest.IDOf(t, s.CreateUser(t, "existing", "admin"))
			user := fmt.Sprintf("/users/%d", existing)
			posts := user + "/posts"
			if res := s.Do(t, tr.Client, request{Method: "POST", Path: posts, Header: apitest.JSONBody, Key: true, Body: `{"title":"kept"}`}); res.Status != 201 {
				t.Fatalf("seed post: %d %s", res.Status, res.Body)
			}
			before := apitest.Snapshot(t, s.BaseURL, existing)

			const missing = "/users/999999"
			wrongKey := map[string]string{"Content-Type": "application/json", "x-api-key": "wrong-" + apitest.Key}
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
				{"a create without a key", request{Method: "POST", Path: "/users", Header: apitest.JSONBody, Body: `{"name":"x"}`}, 401, ""},
				{"a create with a wrong key", request{Method: "POST", Path: "/users", Header: wrongKey, Body: `{"name":"x"}`}, 401, ""},
				{"a create without a key and with a malformed body", request{Method: "POST", Path: "/users", Header: apitest.JSONBody, Body: `{"name":`}, 401, ""},
				{"a create without a key and with a body over the limit", request{Method: "POST", Path: "/users", Header: apitest.JSONBody, Body: tooLarge}, 401, ""},
				{"a create without a key and without a content type", request{Method: "POST", Path: "/users", Body: `{"name":"x"}`}, 401, ""},
				{"a replace without a key", request{Method: "PUT", Path: user, Header: apitest.JSONBody, Body: `{"name":"x"}`}, 401, ""},
				{"a patch without a key", request{Method: "PATCH", Path: user, Header: mergePatch, Body: `{"name":"x"}`}, 401, ""},
				{"a delete without a key", request{Method: "DELETE", Path: user}, 401, ""},
				{"a delete with a wrong key", request{Method: "DELETE", Path: user, Header: wrongKey}, 401, ""},
				{"a post without a key", request{Method: "POST", Path: posts, Header: apitest.JSONBody, Body: `{"title":"x"}`}, 401, ""},
				{"/private without a key", request{Method: "GET", Path: "/private"}, 401, ""},
				{"/private with a wrong key", request{Method: "GET", Path: "/private", Header: wrongKey}, 401, ""},

				// Bodies of creates.
				{"malformed JSON", request{Method: "POST", Path: "/users", Header: apitest.JSONBody, Key: true, Body: `{"name":`}, 400, ""},
				{"an unknown field", request{Method: "POST", Path: "/users", Header: apitest.JSONBody, Key: true, Body: `{"name":"x","nmae":"y"}`}, 400, ""},
				{"a name of the wrong type", request{Method: "POST", Path: "/users", Header: apitest.JSONBody, Key: true, Body: `{"name":5}`}, 400, ""},
				{"a role of the wrong type", request{Method: "POST", Path: "/users", Header: apitest.JSONBody, Key: true, Body: `{"name":"x","role":["a"]}`}, 400, ""},
				{"a missing name", request{Method: "POST", Path: "/users", Header: apitest.JSONBody, Key: true, Body: `{"role":"admin"}`}, 400, ""},
				{"an empty name", request{Method: "POST", Path: "/users", Header: apitest.JSONBody, Key: true, Body: `{"name":""}`}, 400, ""},
				{"a name of spaces", request{Method: "POST", Path: "/users", Header: apitest.JSONBody, Key: true, Body: `{"name":"   "}`}, 400, ""},
				{"a name of null", request{Method: "POST", Path: "/users", Header: apitest.JSONBody, Key: true, Body: `{"name":null}`}, 400, ""},
				{"a name too long", request{Method: "POST", Path: "/users", Header: apitest.JSONBody, Key: true, Body: `{"name":"` + strings.Repeat("é", 201) + `"}`}, 400, ""},
				{"a name with a control character", request{Method: "POST", Path: "/users", Header: apitest.JSONBody, Key: true, Body: `{"name":"a\u0000b"}`}, 400, ""},
				{"a member given twice", request{Method: "POST", Path: "/users", Header: apitest.JSONBody, Key: true, Body: `{"name":"a","name":"b"}`}, 400, ""},
				{"invalid UTF-8", request{Method: "POST", Path: "/users", Header: apitest.JSONBody, Key: true, Body: "{\"name\":\"\xff\xfe\"}"}, 400, ""},
				{"a JSON array", request{Method: "POST", Path: "/users", Header: apitest.JSONBody, Key: true, Body: `[]`}, 400, ""},
				{"JSON null", request{Method: "POST", Path: "/users", Header: apitest.JSONBody, Key: true, Body: `null`}, 400, ""},
				{"an empty body", request{Method: "POST", Path: "/users", Header: apitest.JSONBody, Key: true}, 400, ""},
				{"no content type", request{Method: "POST", Path: "/users", Key: true, Body: `{"name":"x"}`}, 415, ""},
				{"a text content type", request{Method: "POST", Path: "/users", Header: plain, Key: true, Body: `{"name":"x"}`}, 415, ""},
				{"a charset other than UTF-8", request{Method: "POST", Path: "/users", Header: map[string]string{"Content-Type": "application/json; charset=latin1"}, Key: true, Body: `{"name":"x"}`}, 415, ""},
				{"a body over 1 MiB", request{Method: "POST", Path: "/users", Header: apitest.JSONBody, Key: true, Body: tooLarge}, 413, ""},

				// Replace and patch.
				{"a replace whose body names another id", request{Method: "PUT", Path: user, Header: apitest.JSONBody, Key: true, Body: fmt.Sprintf(`{"id":%d,"name":"x"}`, existing+1)}, 400, ""},
				{"a replace without a name", request{Method: "PUT", Path: user, Header: apitest.JSONBody, Key: true, Body: `{"role":"x"}`}, 400, ""},
				{"a replace with a text body", request{Method: "PUT", Path: user, Header: plain, Key: true, Body: `{"name":"x"}`}, 415, ""},
				{"a replace of a missing user", request{Method: "PUT", Path: missing, Header: apitest.JSONBody, Key: true, Body: `{"name":"x"}`}, 404, ""},
				{"a patch that removes the name", request{Method: "PATCH", Path: user, Header: mergePatch, Key: true, Body: `{"name":null}`}, 400, ""},
				{"a patch that empties the name", request{Method: "PATCH", Path: user, Header: mergePatch, Key: true, Body: `{"name":""}`}, 400, ""},
				{"a patch that is an array", request{Method: "PATCH", Path: user, Header: mergePatch, Key: true, Body: `[{"op":"replace"}]`}, 400, ""},
				{"a patch that is a string", request{Method: "PATCH", Path: user, Header: mergePatch, Key: true, Body: `"x"`}, 400, ""},
				{"a patch with an unknown member", request{Method: "PATCH", Path: user, Header: mergePatch, Key: true, Body: `{"bogus":1}`}, 400, ""},
				{"a patch whose body names another id", request{Method: "PATCH", Path: user, Header: mergePatch, Key: true, Body: fmt.Sprintf(`{"id":%d}`, existing+1)}, 400, ""},
				{"a patch as JSON Patch", request{Method: "PATCH", Path: user, Header: map[string]string{"Content-Type": "application/json-patch+json"}, Key: true, Body: `[]`}, 415, ""},
				{"a patch of a missing user", request{Method: "PATCH", Path: missing, Header: mergePatch, Key: true, Body: `{"role":"x"}`}, 404, ""},
				{"a delete of a missing user", request{Method: "DELETE", Path: missing, Key: true}, 404, ""},

				// Posts.
				{"a post without a title", request{Method: "POST", Path: posts, Header: apitest.JSONBody, Key: true, Body: `{"body":"b"}`}, 400, ""},
				{"a post for another user", request{Method: "POST", Path: posts, Header: apitest.JSONBody, Key: true, Body: fmt.Sprintf(`{"title":"t","userId":%d}`, existing+1)}, 400, ""},
				{"a post with a body of the wrong type", request{Method: "POST", Path: posts, Header: apitest.JSONBody, Key: true, Body: `{"title":"t","body":5}`}, 400, ""},
				{"a post for a missing user", request{Method: "POST", Path: missing + "/posts", Header: apitest.JSONBody, Key: true, Body: `{"title":"t"}`}, 404, ""},

				// Ids in the path.
				{"a word as id", request{Method: "GET", Path: "/users/abc"}, 400, ""},
				{"id zero", request{Method: "GET", Path: "/users/0"}, 400, ""},
				{"a negative id", request{Method: "GET", Path: "/users/-1"}, 400, ""},
				{"a fractional id", request{Method: "GET", Path: "/users/1.5"}, 400, ""},
				{"an id past int32", request{Method: "GET", Path: "/users/2147483648"}, 400, ""},
				{"a word as id of posts", request{Method: "GET", Path: "/users/abc/posts"}, 400, ""},
				{"a delete with a word as id", request{Method: "DELETE", Path: "/users/abc", Key: true}, 400, ""},
				{"a missing user", request{Method: "GET", Path: missing}, 404, ""},

				// Routes.
				{"an unknown path", request{Method: "GET", Path: "/nope"}, 404, ""},
				{"an unknown path with POST", request{Method: "POST", Path: "/nope", Header: apitest.JSONBody, Body: `{}`}, 404, ""},
				{"an unknown path with DELETE", request{Method: "DELETE", Path: "/nope"}, 404, ""},
				{"an unknown subresource", request{Method: "GET", Path: user + "/comments"}, 404, ""},
				{"a verb route", request{Method: "POST", Path: "/users/create", Header: apitest.JSONBody, Key: true, Body: `{"name":"x"}`}, 405, "DELETE, GET, HEAD, PATCH, PUT"},
				{"PUT on the collection", request{Method: "PUT", Path: "/users", Header: apitest.JSONBody, Key: true, Body: `{"name":"x"}`}, 405, "GET, HEAD, POST"},
				{"POST on a user", request{Method: "POST", Path: user, Header: apitest.JSONBody, Key: true, Body: `{"name":"x"}`}, 405, "DELETE, GET, HEAD, PATCH, PUT"},
				{"DELETE on posts", request{Method: "DELETE", Path: posts, Key: true}, 405, "GET, HEAD, POST"},
				{"DELETE on /health", request{Method: "DELETE", Path: "/health"}, 405, "GET, HEAD"},
				{"GET on /echo", request{Method: "GET", Path: "/echo"}, 405, "POST"},
				{"POST on a static file", request{Method: "POST", Path: "/index.html"}, 405, "GET, HEAD"},

				// The public echo.
				{"an echo of malformed JSON", request{Method: "POST", Path: "/echo", Header: apitest.JSONBody, Body: `{"a":`}, 400, ""},
				{"an echo of text", request{Method: "POST", Path: "/echo", Header: plain, Body: `hello`}, 415, ""},
			}
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					res := s.Do(t, tr.Client, c.req)
					if res.Status != c.status {
						t.Fatalf("%s %s: %d %s, want %d", c.req.Method, c.req.Path, res.Status, res.Body, c.status)
					}
					res.ErrorMessage(t)
					if res.Header.Get("Content-Type") != "application/json" {
						t.Errorf("Content-Type %q", res.Header.Get("Content-Type"))
					}
					if got := res.Header.Get("Allow"); got != c.allow {
						t.Errorf("Allow %q, want %q", got, c.allow)
					}
				})
			}

			if after := apitest.Snapshot(t, s.BaseURL, existing); after != before {
				t.Fatalf("rejected requests changed the store:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}
