package main

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// adminURL is the admin listener's base URL, from the server's log.
func adminURL(t *testing.T, s *testServer) string {
	t.Helper()
	lines := s.logs.entries(map[string]any{"msg": "admin listening"})
	if len(lines) != 1 {
		t.Fatalf("want one admin listening line, got %d; logs:\n%s", len(lines), s.logs)
	}
	return fmt.Sprintf("http://%s", lines[0]["addr"])
}

// get fetches url and returns its status and body.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	res, err := http1Client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, string(body)
}

// TestTheAdminListenerServesMetricsAndTheProfiler: -admin-addr serves /metrics and net/http/pprof
// on a listener of its own, and the service's port serves neither. -debug-addr, its former name,
// means the same.
func TestTheAdminListenerServesMetricsAndTheProfiler(t *testing.T) {
	for _, variable := range []string{"USERS_ADMIN_ADDR", "USERS_DEBUG_ADDR"} {
		t.Run(variable, func(t *testing.T) {
			s := startServerOn(t, t.TempDir()+"/users.db", map[string]string{variable: "127.0.0.1:0"})
			admin := adminURL(t, s)
			status, metrics := get(t, admin+"/metrics")
			if status != http.StatusOK {
				t.Fatalf("GET /metrics: %d", status)
			}
			for _, name := range []string{"go_goroutines", "process_resident_memory_bytes"} {
				if !strings.Contains(metrics, "\n"+name+" ") {
					t.Errorf("/metrics has no %s", name)
				}
			}
			if status, _ := get(t, admin+"/debug/pprof/cmdline"); status != http.StatusOK {
				t.Errorf("GET /debug/pprof/cmdline on the admin listener: %d, want 200", status)
			}
			for _, path := range []string{"/metrics", "/debug/pprof/cmdline"} {
				if status, _ := get(t, s.baseURL+path); status != http.StatusNotFound {
					t.Errorf("the service port answers %s with %d, want 404", path, status)
				}
			}
		})
	}
}

// TestWithoutAdminAddrNoAdminListens: the admin listener is off by default.
func TestWithoutAdminAddrNoAdminListens(t *testing.T) {
	s := startServer(t)
	if lines := s.logs.entries(map[string]any{"msg": "admin listening"}); len(lines) != 0 {
		t.Errorf("an admin listener started without -admin-addr: %v", lines)
	}
}
