package handlers

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"usersd/internal/apitest"
)

// TestRESTIdempotencyKeys checks every rule of an Idempotency-Key on POST /users and on
// POST /users/:id/posts: replay, mismatch, bad keys, per-caller keys, and a retry after a failure.
func TestRESTIdempotencyKeys(t *testing.T) {
	for _, tr := range apitest.Transports {
		t.Run(tr.Name, func(t *testing.T) {
			s := startServerWith(t, Config{Keys: testKeys(apitest.Key, "second-key-0123456789")})
			post := func(path, key, body string) response {
				return s.Do(t, tr.Client, request{Method: "POST", Path: path, Header: apitest.Keyed(key), Body: body, Key: true})
			}

			first := post("/users", "create-ada", `{"name":"Ada","role":"admin"}`)
			if first.Status != http.StatusCreated || first.Header.Get("Idempotent-Replayed") != "" {
				t.Fatalf("first create: %d %s, Idempotent-Replayed %q", first.Status, first.Body, first.Header.Get("Idempotent-Replayed"))
			}
			// The same JSON value spelled otherwise, and the key in its structured-field form, are
			// the same request.
			apitest.WantReplay(t, first, post("/users", "create-ada", `{"name":"Ada","role":"admin"}`))
			apitest.WantReplay(t, first, post("/users", "create-ada", " {\n\"role\" : \"admin\", \"name\":\"Ada\"}"))
			apitest.WantReplay(t, first, post("/users", `"create-ada"`, `{"name":"Ada","role":"admin"}`))
			if n := apitest.UserCount(t, s.BaseURL); n != "1" {
				t.Fatalf("%s users after a create and its repeats, want 1", n)
			}

			mismatch := post("/users", "create-ada", `{"name":"Ada","role":"reader"}`)
			if mismatch.Status != 422 {
				t.Fatalf("same key, other body: %d %s, want 422", mismatch.Status, mismatch.Body)
			}
			mismatch.ErrorMessage(t)

			// A key belongs to the API key that used it: another caller's same key is a new request.
			other := s.Do(t, tr.Client, request{Method: "POST", Path: "/users", Body: `{"name":"Ada","role":"admin"}`,
				Header: map[string]string{"Content-Type": "application/json", "Idempotency-Key": "create-ada", "x-api-key": "second-key-0123456789"}})
			if other.Status != http.StatusCreated || other.Header.Get("Idempotent-Replayed") != "" || string(other.Body) == string(first.Body) {
				t.Fatalf("another caller's same key: %d %s, want a new user", other.Status, other.Body)
			}

			before := apitest.UserCount(t, s.BaseURL)
			for _, bad := range []string{strings.Repeat("k", 256), "", `""`, "tab\there", "é", `"unterminated`, `"a"b"`, `"a\nb"`} {
				res := post("/users", bad, `{"name":"never"}`)
				if res.Status != http.StatusBadRequest {
					t.Errorf("Idempotency-Key %q: %d %s, want 400", bad, res.Status, res.Body)
					continue
				}
				res.ErrorMessage(t)
			}
			if after := apitest.UserCount(t, s.BaseURL); after != before {
				t.Fatalf("bad keys changed the user count from %s to %s", before, after)
			}
			escaped := post("/users", `"say \"hi\" \\o/"`, `{"name":"escaped"}`)
			if escaped.Status != http.StatusCreated {
				t.Fatalf("a structured-field key with escapes: %d %s", escaped.Status, escaped.Body)
			}
			apitest.WantReplay(t, escaped, post("/users", `say "hi" \o/`, `{"name":"escaped"}`))
			long := strings.Repeat("k", 255)
			if res := post("/users", long, `{"name":"long key"}`); res.Status != http.StatusCreated {
				t.Fatalf("a 255-character key: %d %s, want 201", res.Status, res.Body)
			}

			// Posts: a first attempt that failed keeps nothing, so the same key can be used again.
			adaPosts := fmt.Sprintf("/users/%d/posts", apitest.IDOf(t, apitest.DecodeObject(t, first.Body)))
			if res := post("/users/999999/posts", "post-1", `{"title":"hello"}`); res.Status != http.StatusNotFound {
				t.Fatalf("post to a missing user: %d %s", res.Status, res.Body)
			}
			firstPost := post(adaPosts, "post-1", `{"title":"hello"}`)
			if firstPost.Status != http.StatusCreated || firstPost.Header.Get("Idempotent-Replayed") != "" {
				t.Fatalf("the key of a failed attempt, used again: %d %s", firstPost.Status, firstPost.Body)
			}
			apitest.WantReplay(t, firstPost, post(adaPosts, "post-1", `{"title":"hello"}`))
			if res := post(adaPosts, "post-1", `{"title":"hello","body":"more"}`); res.Status != 422 {
				t.Fatalf("same post key, other body: %d %s, want 422", res.Status, res.Body)
			}
			// The key of a user create is not the key of a post with the same fields.
			if res := post(adaPosts, "create-ada", `{"title":"Ada"}`); res.Status != 422 {
				t.Fatalf("a user create's key reused for a post: %d %s, want 422", res.Status, res.Body)
			}
			posts := s.Do(t, tr.Client, request{Method: "GET", Path: adaPosts})
			if n := posts.Header.Get("X-Total-Count"); n != "1" {
				t.Fatalf("%s posts after one keyed create and its repeats, want 1", n)
			}
		})
	}
}

// TestRESTRepeatWhileTheFirstRunsIsAConflict holds a first keyed create in flight and sends its
// repeat: 409, and once the first finishes, the repeat replays it.
func TestRESTRepeatWhileTheFirstRunsIsAConflict(t *testing.T) {
	for _, tr := range apitest.Transports {
		t.Run(tr.Name, func(t *testing.T) {
			s, held := startHeldServer(t)
			create := request{Method: "POST", Path: "/users", Header: apitest.Keyed("slow"), Body: `{"name":"slow"}`, Key: true}
			firstDone := make(chan response, 1)
			go func() { firstDone <- s.Do(t, tr.Client, create) }()
			<-held.arrived // the first request holds the key and waits inside its create

			repeat := s.Do(t, tr.Client, create)
			if repeat.Status != http.StatusConflict {
				t.Fatalf("repeat while the first runs: %d %s, want 409", repeat.Status, repeat.Body)
			}
			repeat.ErrorMessage(t)
			other := s.Do(t, tr.Client, request{Method: "POST", Path: "/users", Header: apitest.Keyed("slow"), Body: `{"name":"other"}`, Key: true})
			if other.Status != 422 {
				t.Fatalf("other body while the first runs: %d %s, want 422", other.Status, other.Body)
			}

			held.release <- struct{}{}
			first := <-firstDone
			if first.Status != http.StatusCreated {
				t.Fatalf("the held create: %d %s", first.Status, first.Body)
			}
			apitest.WantReplay(t, first, s.Do(t, tr.Client, create))
			if n := apitest.UserCount(t, s.BaseURL); n != "1" {
				t.Fatalf("%s users, want 1", n)
			}
		})
	}
}

// TestRESTConcurrentRetriesCreateOneUser sends 100 POSTs with one key and one body at once, as a
// client with an aggressive retry policy might: one user, and every answer is that user's 201
// (original or replayed) or a 409 for a repeat that met the first in flight.
func TestRESTConcurrentRetriesCreateOneUser(t *testing.T) {
	s := startServer(t)
	const retries = 100
	answers := make([]response, retries)
	var wg sync.WaitGroup
	for i := range retries {
		wg.Go(func() {
			answers[i] = s.Do(t, apitest.Transports[i%len(apitest.Transports)].Client,
				request{Method: "POST", Path: "/users", Header: apitest.Keyed("one-user"), Body: `{"name":"once"}`, Key: true})
		})
	}
	wg.Wait()

	var created []byte
	originals, replays, conflicts := 0, 0, 0
	for i, a := range answers {
		switch {
		case a.Status == http.StatusCreated:
			if created != nil && string(a.Body) != string(created) {
				t.Fatalf("answer %d created %s, another created %s: two users", i, a.Body, created)
			}
			created = a.Body
			if a.Header.Get("Idempotent-Replayed") == "true" {
				replays++
			} else {
				originals++
			}
		case a.Status == http.StatusConflict:
			conflicts++
		default:
			t.Fatalf("answer %d: %d %s, want 201 or 409", i, a.Status, a.Body)
		}
	}
	if originals != 1 {
		t.Fatalf("%d answers were an original create, want exactly 1", originals)
	}
	if n := apitest.UserCount(t, s.BaseURL); n != "1" {
		t.Fatalf("%s users after %d retries of one create, want 1", n, retries)
	}
	t.Logf("%d retries: 1 original, %d replays, %d conflicts", retries, replays, conflicts)
}
