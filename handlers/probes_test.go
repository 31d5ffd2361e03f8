package handlers

import (
	"net/http"
	"os"
	"testing"

	"usersd/internal/apitest"
)

// TestLivenessAndReadiness: /livez is 200 while the process serves, whatever its database does;
// /readyz is 200 while the store answers and the server is not draining, and 503 {"error"} with
// the reason otherwise. A liveness probe on a database-dependent check would restart every replica
// during a database outage.
func TestLivenessAndReadiness(t *testing.T) {
	want := func(t *testing.T, s *testServer, path string, status int, body string) {
		t.Helper()
		res := s.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: path})
		got := string(res.Body)
		if status != http.StatusOK {
			got = res.ErrorMessage(t)
		}
		if res.Status != status || got != body || res.Header.Get("Cache-Control") != "no-store" {
			t.Fatalf("%s: %d %s (Cache-Control %q); want %d %s", path, res.Status, res.Body, res.Header.Get("Cache-Control"), status, body)
		}
	}
	t.Run("serving", func(t *testing.T) {
		s := startServer(t)
		want(t, s, "/livez", 200, `{"ok":true}`)
		want(t, s, "/readyz", 200, `{"ok":true}`)
	})
	t.Run("database lost", func(t *testing.T) {
		s := startServer(t)
		if err := os.Remove(s.dbPath); err != nil {
			t.Fatal(err)
		}
		want(t, s, "/livez", 200, `{"ok":true}`)
		want(t, s, "/readyz", 503, "the database does not answer, or takes no writes")
	})
	t.Run("draining", func(t *testing.T) {
		s := startServer(t)
		s.service.Drain()
		want(t, s, "/livez", 200, `{"ok":true}`)
		want(t, s, "/readyz", 503, "the server is stopping")
	})
}
