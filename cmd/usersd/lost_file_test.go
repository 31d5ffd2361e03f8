package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"usersd/internal/apitest"
	"usersd/store/sqlstore"
)

// TestALostSQLiteFileStopsTheService takes the SQLite file away from under the running binary
// (deleted, renamed, replaced by another database, or its write-ahead log deleted). The process
// keeps the old file open and could go on answering from it, and acknowledging writes that a
// restart would not find. Instead health fails, writes and reads answer 503 with an error body,
// and a create retried with its idempotency key after the restart is not made twice.
func TestALostSQLiteFileStopsTheService(t *testing.T) {
	cases := []struct {
		name string
		// takeAway does to the file at path what an operator or a stray script might.
		takeAway func(t *testing.T, path string)
		// undo, if any, is what the operator does once the service is stopped, to get the
		// file back; the acknowledged users must then all be there.
		undo func(t *testing.T, path string)
		// healthFirst has a health check, not a write, be the first to look at the file.
		healthFirst bool
	}{
		{name: "file deleted", takeAway: func(t *testing.T, path string) { remove(t, path) }, healthFirst: true},
		{
			name:     "file renamed",
			takeAway: func(t *testing.T, path string) { rename(t, path, path+".moved") },
			undo:     func(t *testing.T, path string) { rename(t, path+".moved", path) },
		},
		{name: "file replaced", takeAway: func(t *testing.T, path string) {
			other := filepath.Join(t.TempDir(), "other.db")
			st, err := sqlstore.Open(t.Context(), other)
			if err != nil {
				t.Fatal(err)
			}
			st.Close()
			rename(t, other, path)
		}},
		{
			name:     "write-ahead log deleted",
			takeAway: func(t *testing.T, path string) { remove(t, path+"-wal") },
			// Nothing to undo: the service copied the log it still had open into the file.
			undo:        func(*testing.T, string) {},
			healthFirst: true,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "users.db")
			cmd, s, logs := startProcess(t, path)
			var acknowledged []int
			for i := range 5 {
				acknowledged = append(acknowledged, apitest.IDOf(t, s.CreateUser(t, fmt.Sprint("before ", i), "")))
			}

			c.takeAway(t, path)
			create := request{Method: "POST", Path: "/users", Header: map[string]string{
				"Content-Type": "application/json", "Idempotency-Key": "after-" + strconv.Itoa(len(c.name)),
			}, Body: `{"name":"after"}`, Key: true}
			health := request{Method: "GET", Path: "/health"}
			first, second := create, health
			if c.healthFirst {
				first, second = health, create
			}
			for _, req := range []request{first, second, create, {Method: "GET", Path: "/users"}} {
				res := s.Do(t, apitest.HTTP1Client, req)
				if res.Status != http.StatusServiceUnavailable {
					t.Fatalf("%s %s, %s: %d %s, want 503", req.Method, req.Path, c.name, res.Status, res.Body)
				}
				if req.Path != "/health" {
					t.Logf("%s %s: %s", req.Method, req.Path, res.ErrorMessage(t))
				}
			}

			// Killed, not stopped: what keeps the data safe must not wait for a clean stop.
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			cmd.Wait()
			var said bool
			for _, line := range <-logs {
				message, _ := line["error"].(string)
				said = said || strings.Contains(message, path) && strings.Contains(message, "is no longer the file this process opened")
			}
			if !said {
				t.Error("no log line says which file was lost")
			}
			if c.undo == nil {
				// What was acknowledged went with the file; the service starts on what is there now.
				acknowledged = nil
			} else {
				c.undo(t, path)
			}
			_, again, _ := startProcess(t, path)
			for _, id := range acknowledged {
				if res := again.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: fmt.Sprintf("/users/%d", id)}); res.Status != http.StatusOK {
					t.Fatalf("user %d, acknowledged before the %s: %d %s", id, c.name, res.Status, res.Body)
				}
			}
			retried := again.Do(t, apitest.HTTP1Client, create)
			if retried.Status != http.StatusCreated {
				t.Fatalf("the create retried after the restart: %d %s", retried.Status, retried.Body)
			}
			list := again.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: "/users"})
			if got, want := list.Header.Get("X-Total-Count"), strconv.Itoa(len(acknowledged)+1); got != want {
				t.Fatalf("after the restart %s users, want %s: the acknowledged ones and one of the retried create\n%s", got, want, list.Body)
			}
		})
	}
}

func remove(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
}

func rename(t *testing.T, from, to string) {
	t.Helper()
	if err := os.Rename(from, to); err != nil {
		t.Fatal(err)
	}
}
