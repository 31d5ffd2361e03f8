package main

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// keyed returns the headers of a JSON create with an Idempotency-Key.
func keyed(key string) map[string]string {
	return map[string]string{"Content-Type": "application/json", "Idempotency-Key": key}
}

// userCount returns how many users the service lists.
func userCount(t *testing.T, s *testServer) string {
	t.Helper()
	res := s.do(t, http1Client, request{method: "GET", path: "/users?limit=1"})
	if res.status != http.StatusOK {
		t.Fatalf("list users: %d %s", res.status, res.body)
	}
	return res.header.Get("X-Total-Count")
}

// wantReplay fails the test unless repeat is first again, marked as replayed.
func wantReplay(t *testing.T, first, repeat response) {
	t.Helper()
	if repeat.status != first.status || string(repeat.body) != string(first.body) {
		t.Fatalf("repeat answered %d %s, want the first answer %d %s", repeat.status, repeat.body, first.status, first.body)
	}
	if repeat.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("repeat has Idempotent-Replayed %q, want true", repeat.header.Get("Idempotent-Replayed"))
	}
	for _, h := range []string{"Location", "ETag", "Content-Type"} {
		if repeat.header.Get(h) != first.header.Get(h) {
			t.Errorf("repeat has %s %q, first had %q", h, repeat.header.Get(h), first.header.Get(h))
		}
	}
}

// TestRESTIdempotencyKeys checks every rule of an Idempotency-Key on POST /users and on
// POST /users/:id/posts: replay, mismatch, bad keys, per-caller keys, and a retry after a failure.
func TestRESTIdempotencyKeys(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			s := startServerOn(t, filepath.Join(t.TempDir(), "users.db"), map[string]string{"USERS_API_KEYS": testKey + ",second-key-0123456789"})
			post := func(path, key, body string) response {
				return s.do(t, tr.client, request{method: "POST", path: path, header: keyed(key), body: body, key: true})
			}

			first := post("/users", "create-ada", `{"name":"Ada","role":"admin"}`)
			if first.status != http.StatusCreated || first.header.Get("Idempotent-Replayed") != "" {
				t.Fatalf("first create: %d %s, Idempotent-Replayed %q", first.status, first.body, first.header.Get("Idempotent-Replayed"))
			}
			// The same JSON value spelled otherwise, and the key in its structured-field form, are
			// the same request.
			wantReplay(t, first, post("/users", "create-ada", `{"name":"Ada","role":"admin"}`))
			wantReplay(t, first, post("/users", "create-ada", " {\n\"role\" : \"admin\", \"name\":\"Ada\"}"))
			wantReplay(t, first, post("/users", `"create-ada"`, `{"name":"Ada","role":"admin"}`))
			if n := userCount(t, s); n != "1" {
				t.Fatalf("%s users after a create and its repeats, want 1", n)
			}

			mismatch := post("/users", "create-ada", `{"name":"Ada","role":"reader"}`)
			if mismatch.status != 422 {
				t.Fatalf("same key, other body: %d %s, want 422", mismatch.status, mismatch.body)
			}
			mismatch.errorMessage(t)

			// A key belongs to the API key that used it: another caller's same key is a new request.
			other := s.do(t, tr.client, request{method: "POST", path: "/users", body: `{"name":"Ada","role":"admin"}`,
				header: map[string]string{"Content-Type": "application/json", "Idempotency-Key": "create-ada", "x-api-key": "second-key-0123456789"}})
			if other.status != http.StatusCreated || other.header.Get("Idempotent-Replayed") != "" || string(other.body) == string(first.body) {
				t.Fatalf("another caller's same key: %d %s, want a new user", other.status, other.body)
			}

			before := userCount(t, s)
			for _, bad := range []string{strings.Repeat("k", 256), "", `""`, "tab\there", "é", `"unterminated`, `"a"b"`, `"a\nb"`} {
				res := post("/users", bad, `{"name":"never"}`)
				if res.status != http.StatusBadRequest {
					t.Errorf("Idempotency-Key %q: %d %s, want 400", bad, res.status, res.body)
					continue
				}
				res.errorMessage(t)
			}
			if after := userCount(t, s); after != before {
				t.Fatalf("bad keys changed the user count from %s to %s", before, after)
			}
			escaped := post("/users", `"say \"hi\" \\o/"`, `{"name":"escaped"}`)
			if escaped.status != http.StatusCreated {
				t.Fatalf("a structured-field key with escapes: %d %s", escaped.status, escaped.body)
			}
			wantReplay(t, escaped, post("/users", `say "hi" \o/`, `{"name":"escaped"}`))
			long := strings.Repeat("k", 255)
			if res := post("/users", long, `{"name":"long key"}`); res.status != http.StatusCreated {
				t.Fatalf("a 255-character key: %d %s, want 201", res.status, res.body)
			}

			// Posts: a first attempt that failed keeps nothing, so the same key can be used again.
			adaPosts := fmt.Sprintf("/users/%d/posts", idOf(t, decodeObject(t, first.body)))
			if res := post("/users/999999/posts", "post-1", `{"title":"hello"}`); res.status != http.StatusNotFound {
				t.Fatalf("post to a missing user: %d %s", res.status, res.body)
			}
			firstPost := post(adaPosts, "post-1", `{"title":"hello"}`)
			if firstPost.status != http.StatusCreated || firstPost.header.Get("Idempotent-Replayed") != "" {
				t.Fatalf("the key of a failed attempt, used again: %d %s", firstPost.status, firstPost.body)
			}
			wantReplay(t, firstPost, post(adaPosts, "post-1", `{"title":"hello"}`))
			if res := post(adaPosts, "post-1", `{"title":"hello","body":"more"}`); res.status != 422 {
				t.Fatalf("same post key, other body: %d %s, want 422", res.status, res.body)
			}
			// The key of a user create is not the key of a post with the same fields.
			if res := post(adaPosts, "create-ada", `{"title":"Ada"}`); res.status != 422 {
				t.Fatalf("a user create's key reused for a post: %d %s, want 422", res.status, res.body)
			}
			posts := s.do(t, tr.client, request{method: "GET", path: adaPosts})
			if n := posts.header.Get("X-Total-Count"); n != "1" {
				t.Fatalf("%s posts after one keyed create and its repeats, want 1", n)
			}
		})
	}
}

// TestRESTRepeatWhileTheFirstRunsIsAConflict holds a first keyed create in flight and sends its
// repeat: 409, and once the first finishes, the repeat replays it.
func TestRESTRepeatWhileTheFirstRunsIsAConflict(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			s, held := startHeldServer(t)
			create := request{method: "POST", path: "/users", header: keyed("slow"), body: `{"name":"slow"}`, key: true}
			firstDone := make(chan response, 1)
			go func() { firstDone <- s.do(t, tr.client, create) }()
			<-held.arrived // the first request holds the key and waits inside its create

			repeat := s.do(t, tr.client, create)
			if repeat.status != http.StatusConflict {
				t.Fatalf("repeat while the first runs: %d %s, want 409", repeat.status, repeat.body)
			}
			repeat.errorMessage(t)
			other := s.do(t, tr.client, request{method: "POST", path: "/users", header: keyed("slow"), body: `{"name":"other"}`, key: true})
			if other.status != 422 {
				t.Fatalf("other body while the first runs: %d %s, want 422", other.status, other.body)
			}

			held.release <- struct{}{}
			first := <-firstDone
			if first.status != http.StatusCreated {
				t.Fatalf("the held create: %d %s", first.status, first.body)
			}
			wantReplay(t, first, s.do(t, tr.client, create))
			if n := userCount(t, s); n != "1" {
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
			answers[i] = s.do(t, transports[i%len(transports)].client,
				request{method: "POST", path: "/users", header: keyed("one-user"), body: `{"name":"once"}`, key: true})
		})
	}
	wg.Wait()

	var created []byte
	originals, replays, conflicts := 0, 0, 0
	for i, a := range answers {
		switch {
		case a.status == http.StatusCreated:
			if created != nil && string(a.body) != string(created) {
				t.Fatalf("answer %d created %s, another created %s: two users", i, a.body, created)
			}
			created = a.body
			if a.header.Get("Idempotent-Replayed") == "true" {
				replays++
			} else {
				originals++
			}
		case a.status == http.StatusConflict:
			conflicts++
		default:
			t.Fatalf("answer %d: %d %s, want 201 or 409", i, a.status, a.body)
		}
	}
	if originals != 1 {
		t.Fatalf("%d answers were an original create, want exactly 1", originals)
	}
	if n := userCount(t, s); n != "1" {
		t.Fatalf("%s users after %d retries of one create, want 1", n, retries)
	}
	t.Logf("%d retries: 1 original, %d replays, %d conflicts", retries, replays, conflicts)
}

// TestAnAcknowledgedKeyedCreateSurvivesSIGKILL: once a keyed create is answered, its answer is on
// disk with the user, so a process killed without warning replays it after a restart.
func TestAnAcknowledgedKeyedCreateSurvivesSIGKILL(t *testing.T) {
	dbPath := filepath.Join(t.TempDir(), "users.db")
	cmd, s, _ := startProcess(t, dbPath)
	create := request{method: "POST", path: "/users", header: keyed("before-the-crash"), body: `{"name":"durable"}`, key: true}
	first := s.do(t, http1Client, create)
	if first.status != http.StatusCreated {
		t.Fatalf("create: %d %s", first.status, first.body)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()

	_, restarted, _ := startProcess(t, dbPath)
	wantReplay(t, first, restarted.do(t, http1Client, create))
	if n := userCount(t, restarted); n != "1" {
		t.Fatalf("%s users after the crash and the repeat, want 1", n)
	}
}
