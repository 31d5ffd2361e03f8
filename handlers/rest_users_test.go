package handlers

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"usersd/internal/apitest"
)

func TestRESTUserLifecycle(t *testing.T) {
	for _, tr := range apitest.Transports {
		t.Run(tr.Name, func(t *testing.T) {
			s := startServer(t)
			c := tr.Client

			created := s.Do(t, c, request{Method: "POST", Path: "/users", Header: apitest.JSONBody, Key: true,
				Body: `{"name":"Ada Lovelace","role":"admin","id":99,"createdAt":"2000-01-01T00:00:00Z","etag":"\"x\""}`})
			if created.Status != http.StatusCreated {
				t.Fatalf("create: %d %s", created.Status, created.Body)
			}
			user := apitest.DecodeObject(t, created.Body)
			id := apitest.IDOf(t, user)
			if id == 99 || user["name"] != "Ada Lovelace" || user["role"] != "admin" || user["etag"] != `"1"` {
				t.Fatalf("created %v: want a server-assigned id, the name and role sent, etag \"1\"", user)
			}
			if user["createdAt"] == "2000-01-01T00:00:00Z" || user["createdAt"] != user["updatedAt"] {
				t.Fatalf("created %v: output-only times must come from the server", user)
			}
			if got := created.Header.Get("Location"); got != fmt.Sprintf("/users/%d", id) {
				t.Fatalf("Location %q", got)
			}
			if created.Header.Get("ETag") != `"1"` || created.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("headers %v", created.Header)
			}

			got := s.Do(t, c, request{Method: "GET", Path: fmt.Sprintf("/users/%d", id)})
			if got.Status != http.StatusOK || string(got.Body) != string(created.Body) || got.Header.Get("ETag") != `"1"` {
				t.Fatalf("get: %d %s (ETag %q), want the created body %s", got.Status, got.Body, got.Header.Get("ETag"), created.Body)
			}

			replaced := s.Do(t, c, request{Method: "PUT", Path: fmt.Sprintf("/users/%d", id), Header: apitest.JSONBody, Key: true,
				Body: fmt.Sprintf(`{"id":%d,"name":"Ada King"}`, id)})
			r := apitest.DecodeObject(t, replaced.Body)
			if replaced.Status != http.StatusOK || r["name"] != "Ada King" || r["role"] != nil || r["etag"] != `"2"` ||
				r["createdAt"] != user["createdAt"] || replaced.Header.Get("ETag") != `"2"` {
				t.Fatalf("replace: %d %s: want the new name, no role, etag \"2\", the same createdAt", replaced.Status, replaced.Body)
			}

			patched := s.Do(t, c, request{Method: "PATCH", Path: fmt.Sprintf("/users/%d", id),
				Header: map[string]string{"Content-Type": "application/merge-patch+json"}, Key: true, Body: `{"role":"countess"}`})
			p := apitest.DecodeObject(t, patched.Body)
			if patched.Status != http.StatusOK || p["name"] != "Ada King" || p["role"] != "countess" || p["etag"] != `"3"` {
				t.Fatalf("patch role: %d %s", patched.Status, patched.Body)
			}
			cleared := s.Do(t, c, request{Method: "PATCH", Path: fmt.Sprintf("/users/%d", id), Header: apitest.JSONBody, Key: true,
				Body: `{"role":null}`})
			if p := apitest.DecodeObject(t, cleared.Body); cleared.Status != http.StatusOK || p["role"] != nil || p["name"] != "Ada King" {
				t.Fatalf("patch role null: %d %s, want the role removed and the name kept", cleared.Status, cleared.Body)
			}
			empty := s.Do(t, c, request{Method: "PATCH", Path: fmt.Sprintf("/users/%d", id), Header: apitest.JSONBody, Key: true, Body: `{}`})
			if e := apitest.DecodeObject(t, empty.Body); empty.Status != http.StatusOK || e["etag"] != `"4"` {
				t.Fatalf("empty patch: %d %s, want the user unchanged at etag \"4\"", empty.Status, empty.Body)
			}

			deleted := s.Do(t, c, request{Method: "DELETE", Path: fmt.Sprintf("/users/%d", id), Key: true})
			if deleted.Status != http.StatusNoContent || len(deleted.Body) != 0 {
				t.Fatalf("delete: %d %q, want 204 with no body", deleted.Status, deleted.Body)
			}
			for _, req := range []request{
				{Method: "GET", Path: fmt.Sprintf("/users/%d", id)},
				{Method: "DELETE", Path: fmt.Sprintf("/users/%d", id), Key: true},
				{Method: "GET", Path: fmt.Sprintf("/users/%d/posts", id)},
			} {
				if res := s.Do(t, c, req); res.Status != http.StatusNotFound || !strings.Contains(res.ErrorMessage(t), "not found") {
					t.Fatalf("%s %s after delete: %d %s, want 404", req.Method, req.Path, res.Status, res.Body)
				}
			}
		})
	}
}

func TestRESTPosts(t *testing.T) {
	for _, tr := range apitest.Transports {
		t.Run(tr.Name, func(t *testing.T) {
			s := startServer(t)
			c := tr.Client
			author := apitest.IDOf(t, s.CreateUser(t, "author", ""))
			path := fmt.Sprintf("/users/%d/posts", author)
			var ids []float64
			for i := range 3 {
				res := s.Do(t, c, request{Method: "POST", Path: path, Header: apitest.JSONBody, Key: true,
					Body: fmt.Sprintf(`{"title":"post %d","body":"line one\nline two","userId":%d}`, i, author)})
				if res.Status != http.StatusCreated {
					t.Fatalf("create post: %d %s", res.Status, res.Body)
				}
				p := apitest.DecodeObject(t, res.Body)
				if p["title"] != fmt.Sprintf("post %d", i) || p["userId"] != float64(author) || p["body"] != "line one\nline two" {
					t.Fatalf("created post %s", res.Body)
				}
				ids = append(ids, p["id"].(float64))
			}

			page := s.Do(t, c, request{Method: "GET", Path: path + "?limit=2&page=2"})
			posts := apitest.DecodeArray(t, page.Body)
			if page.Status != 200 || len(posts) != 1 || posts[0]["id"] != ids[2] || page.Header.Get("X-Total-Count") != "3" {
				t.Fatalf("page 2 of posts: %d %s (total %q)", page.Status, page.Body, page.Header.Get("X-Total-Count"))
			}
			wantLink := fmt.Sprintf(`<%[1]s?limit=2&page=1>; rel="first", <%[1]s?limit=2&page=1>; rel="prev", <%[1]s?limit=2&page=2>; rel="last"`, path)
			if got := page.Header.Get("Link"); got != wantLink {
				t.Fatalf("Link\n got %s\nwant %s", got, wantLink)
			}
			all := apitest.DecodeArray(t, s.Do(t, c, request{Method: "GET", Path: path}).Body)
			if len(all) != 3 || all[0]["id"] != ids[0] || all[2]["id"] != ids[2] {
				t.Fatalf("all posts %v, want ids %v in order", all, ids)
			}
		})
	}
}

func TestRESTConcurrentCreatesAllSucceed(t *testing.T) {
	s := startServer(t)
	const n = 50
	statuses := make([]int, n)
	ids := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			c := apitest.Transports[i%len(apitest.Transports)].Client
			res := s.Do(t, c, request{Method: "POST", Path: "/users", Header: apitest.JSONBody, Key: true, Body: fmt.Sprintf(`{"name":"user %d"}`, i)})
			statuses[i] = res.Status
			if res.Status == http.StatusCreated {
				ids[i] = apitest.IDOf(t, apitest.DecodeObject(t, res.Body))
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
	if total := s.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: "/users?limit=1"}).Header.Get("X-Total-Count"); total != fmt.Sprint(n) {
		t.Fatalf("X-Total-Count %s after %d creates", total, n)
	}
}
