package main

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"usersd/internal/apitest"
)

// keyed returns the headers of a JSON create with an Idempotency-Key.
func keyed(key string) map[string]string {
	return map[string]string{"Content-Type": "application/json", "Idempotency-Key": key}
}

// userCount returns how many users the service lists.
func userCount(t *testing.T, s *testServer) string {
	t.Helper()
	res := s.do(t, apitest.HTTP1Client, request{Method: "GET", Path: "/users?limit=1"})
	if res.Status != http.StatusOK {
		t.Fatalf("list users: %d %s", res.Status, res.Body)
	}
	return res.Header.Get("X-Total-Count")
}

// wantReplay fails the test unless repeat is first again, marked as replayed.
func wantReplay(t *testing.T, first, repeat response) {
	t.Helper()
	if repeat.Status != first.Status || string(repeat.Body) != string(first.Body) {
		t.Fatalf("repeat answered %d %s, want the first answer %d %s", repeat.Status, repeat.Body, first.Status, first.Body)
	}
	if repeat.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("repeat has Idempotent-Replayed %q, want true", repeat.Header.Get("Idempotent-Replayed"))
	}
	for _, h := range []string{"Location", "ETag", "Content-Type"} {
		if repeat.Header.Get(h) != first.Header.Get(h) {
			t.Errorf("repeat has %s %q, first had %q", h, repeat.Header.Get(h), first.Header.Get(h))
		}
	}
}

// TestRESTIdempotencyKeys checks every rule of an Idempotency-Key on POST /users and on
// POST /users/:id/posts: replay, mismatch, bad keys, per-caller keys, and a retry after a failure.
func TestRESTIdempotencyKeys(t *testing.T) {
	for _, tr := range apitest.Transports {
		t.Run(tr.Name, func(t *testing.T) {
			s := startServerOn(t, filepath.Join(t.TempDir(), "users.db"), map[string]string{"USERS_API_KEYS": apitest.Key + ",second-key-0123456789"})
			post := func(path, key, body string) response {
				return s.do(t, tr.Client, request{Method: "POST", Path: path, Header: keyed(key), Body: body, Key: true})
			}

			first := post("/users", "create-ada", `{"name":"Ada","role":"admin"}`)
			if first.Status != http.StatusCreated || first.Header.Get("Idempotent-Replayed") != "" {
				t.Fatalf("first create: %d %s, Idempotent-Replayed %q", first.Status, first.Body, first.Header.Get("Idempotent-Replayed"))
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
			if mismatch.Status != 422 {
				t.Fatalf("same key, other body: %d %s, want 422", mismatch.Status, mismatch.Body)
			}
			mismatch.ErrorMessage(t)

			// A key belongs to the API key that used it: another caller's same key is a new request.
			other := s.do(t, tr.Client, request{Method: "POST", Path: "/users", Body: `{"name":"Ada","role":"admin"}`,
				Header: map[string]string{"Content-Type": "application/json", "Idempotency-Key": "create-ada", "x-api-key": "second-key-0123456789"}})
			if other.Status != http.StatusCreated || other.Header.Get("Idempotent-Replayed") != "" || string(other.Body) == string(first.Body) {
				t.Fatalf("another caller's same key: %d %s, want a new user", other.Status, other.Body)
			}

			before := userCount(t, s)
			for _, bad := range []string{strings.Repeat("k", 256), "", `""`, "tab\there", "é", `"unterminated`, `"a"b"`, `"a\nb"`} {
				res := post("/users", bad, `{"name":"never"}`)
				if res.Status != http.StatusBadRequest {
					t.Errorf("Idempotency-Key %q: %d %s, want 400", bad, res.Status, res.Body)
					continue
				}
				res.ErrorMessage(t)
			}
			if after := userCount(t, s); after != before {
				t.Fatalf("bad keys changed the user count from %s to %s", before, after)
			}
			escaped := post("/users", `"say \"hi\" \\o/"`, `{"name":"escaped"}`)
			if escaped.Status != http.StatusCreated {
				t.Fatalf("a structured-field key with escapes: %d %s", escaped.Status, escaped.Body)
			}
			wantReplay(t, escaped, post("/users", `say "hi" \o/`, `{"name":"escaped"}`))
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
			wantReplay(t, firstPost, post(adaPosts, "post-1", `{"title":"hello"}`))
			if res := post(adaPosts, "post-1", `{"title":"hello","body":"more"}`); res.Status != 422 {
				t.Fatalf("same post key, other body: %d %s, want 422", res.Status, res.Body)
			}
			// The key of a user create is not the key of a post with the same fields.
			if res := post(adaPosts, "create-ada", `{"title":"Ada"}`); res.Status != 422 {
				t.Fatalf("a user create's key reused for a post: %d %s, want 422", res.Status, res.Body)
			}
			posts := s.do(t, tr.Client, request{Method: "GET", Path: adaPosts})
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
			create := request{Method: "POST", Path: "/users", Header: keyed("slow"), Body: `{"name":"slow"}`, Key: true}
			firstDone := make(chan response, 1)
			go func() { firstDone <- s.do(t, tr.Client, create) }()
			<-held.arrived // the first request holds the key and waits inside its create

			repeat := s.do(t, tr.Client, create)
			if repeat.Status != http.StatusConflict {
				t.Fatalf("repeat while the first runs: %d %s, want 409", repeat.Status, repeat.Body)
			}
			repeat.ErrorMessage(t)
			other := s.do(t, tr.Client, request{Method: "POST", Path: "/users", Header: keyed("slow"), Body: `{"name":"other"}`, Key: true})
			if other.Status != 422 {
				t.Fatalf("other body while the first runs: %d %s, want 422", other.Status, other.Body)
			}

			held.release <- struct{}{}
			first := <-firstDone
			if first.Status != http.StatusCreated {
				t.Fatalf("the held create: %d %s", first.Status, first.Body)
			}
			wantReplay(t, first, s.do(t, tr.Client, create))
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
			answers[i] = s.do(t, apitest.Transports[i%len(apitest.Transports)].Client,
				request{Method: "POST", Path: "/users", Header: keyed("one-user"), Body: `{"name":"once"}`, Key: true})
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
	create := request{Method: "POST", Path: "/users", Header: keyed("before-the-crash"), Body: `{"name":"durable"}`, Key: true}
	first := s.do(t, apitest.HTTP1Client, create)
	if first.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", first.Status, first.Body)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()

	_, restarted, _ := startProcess(t, dbPath)
	wantReplay(t, first, restarted.do(t, apitest.HTTP1Client, create))
	if n := userCount(t, restarted); n != "1" {
		t.Fatalf("%s users after the crash and the repeat, want 1", n)
	}
}
