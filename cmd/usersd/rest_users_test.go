package main

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
)

func TestRESTUserLifecycle(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			s := startServer(t)
			c := tr.client

			created := s.do(t, c, request{method: "POST", path: "/users", header: jsonBody, key: true,
				body: `{"name":"Ada Lovelace","role":"admin","id":99,"createdAt":"2000-01-01T00:00:00Z","etag":"\"x\""}`})
			if created.status != http.StatusCreated {
				t.Fatalf("create: %d %s", created.status, created.body)
			}
			user := decodeObject(t, created.body)
			id := idOf(t, user)
			if id == 99 || user["name"] != "Ada Lovelace" || user["role"] != "admin" || user["etag"] != `"1"` {
				t.Fatalf("created %v: want a server-assigned id, the name and role sent, etag \"1\"", user)
			}
			if user["createdAt"] == "2000-01-01T00:00:00Z" || user["createdAt"] != user["updatedAt"] {
				t.Fatalf("created %v: output-only times must come from the server", user)
			}
			if got := created.header.Get("Location"); got != fmt.Sprintf("/users/%d", id) {
				t.Fatalf("Location %q", got)
			}
			if created.header.Get("ETag") != `"1"` || created.header.Get("Content-Type") != "application/json" {
				t.Fatalf("headers %v", created.header)
			}

			got := s.do(t, c, request{method: "GET", path: fmt.Sprintf("/users/%d", id)})
			if got.status != http.StatusOK || string(got.body) != string(created.body) || got.header.Get("ETag") != `"1"` {
				t.Fatalf("get: %d %s (ETag %q), want the created body %s", got.status, got.body, got.header.Get("ETag"), created.body)
			}

			replaced := s.do(t, c, request{method: "PUT", path: fmt.Sprintf("/users/%d", id), header: jsonBody, key: true,
				body: fmt.Sprintf(`{"id":%d,"name":"Ada King"}`, id)})
			r := decodeObject(t, replaced.body)
			if replaced.status != http.StatusOK || r["name"] != "Ada King" || r["role"] != nil || r["etag"] != `"2"` ||
				r["createdAt"] != user["createdAt"] || replaced.header.Get("ETag") != `"2"` {
				t.Fatalf("replace: %d %s: want the new name, no role, etag \"2\", the same createdAt", replaced.status, replaced.body)
			}

			patched := s.do(t, c, request{method: "PATCH", path: fmt.Sprintf("/users/%d", id),
				header: map[string]string{"Content-Type": "application/merge-patch+json"}, key: true, body: `{"role":"countess"}`})
			p := decodeObject(t, patched.body)
			if patched.status != http.StatusOK || p["name"] != "Ada King" || p["role"] != "countess" || p["etag"] != `"3"` {
				t.Fatalf("patch role: %d %s", patched.status, patched.body)
			}
			cleared := s.do(t, c, request{method: "PATCH", path: fmt.Sprintf("/users/%d", id), header: jsonBody, key: true,
				body: `{"role":null}`})
			if p := decodeObject(t, cleared.body); cleared.status != http.StatusOK || p["role"] != nil || p["name"] != "Ada King" {
				t.Fatalf("patch role null: %d %s, want the role removed and the name kept", cleared.status, cleared.body)
			}
			empty := s.do(t, c, request{method: "PATCH", path: fmt.Sprintf("/users/%d", id), header: jsonBody, key: true, body: `{}`})
			if e := decodeObject(t, empty.body); empty.status != http.StatusOK || e["etag"] != `"4"` {
				t.Fatalf("empty patch: %d %s, want the user unchanged at etag \"4\"", empty.status, empty.body)
			}

			deleted := s.do(t, c, request{method: "DELETE", path: fmt.Sprintf("/users/%d", id), key: true})
			if deleted.status != http.StatusNoContent || len(deleted.body) != 0 {
				t.Fatalf("delete: %d %q, want 204 with no body", deleted.status, deleted.body)
			}
			for _, req := range []request{
				{method: "GET", path: fmt.Sprintf("/users/%d", id)},
				{method: "DELETE", path: fmt.Sprintf("/users/%d", id), key: true},
				{method: "GET", path: fmt.Sprintf("/users/%d/posts", id)},
			} {
				if res := s.do(t, c, req); res.status != http.StatusNotFound || !strings.Contains(res.errorMessage(t), "not found") {
					t.Fatalf("%s %s after delete: %d %s, want 404", req.method, req.path, res.status, res.body)
				}
			}
		})
	}
}

func TestRESTPosts(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			s := startServer(t)
			c := tr.client
			author := idOf(t, s.createUser(t, "author", ""))
			path := fmt.Sprintf("/users/%d/posts", author)
			var ids []float64
			for i := range 3 {
				res := s.do(t, c, request{method: "POST", path: path, header: jsonBody, key: true,
					body: fmt.Sprintf(`{"title":"post %d","body":"line one\nline two","userId":%d}`, i, author)})
				if res.status != http.StatusCreated {
					t.Fatalf("create post: %d %s", res.status, res.body)
				}
				p := decodeObject(t, res.body)
				if p["title"] != fmt.Sprintf("post %d", i) || p["userId"] != float64(author) || p["body"] != "line one\nline two" {
					t.Fatalf("created post %s", res.body)
				}
				ids = append(ids, p["id"].(float64))
			}

			page := s.do(t, c, request{method: "GET", path: path + "?limit=2&page=2"})
			posts := decodeArray(t, page.body)
			if page.status != 200 || len(posts) != 1 || posts[0]["id"] != ids[2] || page.header.Get("X-Total-Count") != "3" {
				t.Fatalf("page 2 of posts: %d %s (total %q)", page.status, page.body, page.header.Get("X-Total-Count"))
			}
			wantLink := fmt.Sprintf(`<%[1]s?limit=2&page=1>; rel="first", <%[1]s?limit=2&page=1>; rel="prev", <%[1]s?limit=2&page=2>; rel="last"`, path)
			if got := page.header.Get("Link"); got != wantLink {
				t.Fatalf("Link\n got %s\nwant %s", got, wantLink)
			}
			all := decodeArray(t, s.do(t, c, request{method: "GET", path: path}).body)
			if len(all) != 3 || all[0]["id"] != ids[0] || all[2]["id"] != ids[2] {
				t.Fatalf("all posts %v, want ids %v in order", all, ids)
			}
		})
	}
}

// idOf reads the id of a decoded user or post.
func idOf(t *testing.T, o map[string]any) int {
	t.Helper()
	id, ok := o["id"].(float64)
	if !ok {
		t.Fatalf("%v has no numeric id", o)
	}
	return int(id)
}

func TestRESTConcurrentCreatesAllSucceed(t *testing.T) {
	s := startServer(t)
	const n = 50
	statuses := make([]int, n)
	ids := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			c := transports[i%len(transports)].client
			res := s.do(t, c, request{method: "POST", path: "/users", header: jsonBody, key: true, body: fmt.Sprintf(`{"name":"user %d"}`, i)})
			statuses[i] = res.status
			if res.status == http.StatusCreated {
				ids[i] = idOf(t, decodeObject(t, res.body))
			}
		})
	}
	wg.Wait()
	seen := map[int]bool{}
	for i, status := range statuses {
		if status != http.StatusCreated || seen[ids[i]] {
			t.Fatalf("create %d: status %d, id %d (seen before: %v)", i, status, ids[i], seen[ids[i]])
		}
		seen[ids[i]] = true
	}
	if total := s.do(t, http1Client, request{method: "GET", path: "/users?limit=1"}).header.Get("X-Total-Count"); total != fmt.Sprint(n) {
		t.Fatalf("X-Total-Count %s after %d creates", total, n)
	}
}
