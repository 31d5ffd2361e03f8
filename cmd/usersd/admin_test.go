package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"usersd/internal/apitest"
)

// adminServer is the admin listener, at the address from the server's log.
func adminServer(t *testing.T, s *testServer) *testServer {
	t.Helper()
	lines := s.logs.Entries(map[string]any{"msg": "admin listening"})
	if len(lines) != 1 {
		t.Fatalf("want one admin listening line, got %d; logs:\n%s", len(lines), s.logs)
	}
	return &testServer{Server: apitest.Server{BaseURL: fmt.Sprintf("http://%s", lines[0]["addr"])}}
}

// TestTheAdminListenerServesMetricsAndTheProfiler: -admin-addr serves /metrics and net/http/pprof
// on a listener of its own, and the service's port serves neither. -debug-addr, its former name,
// means the same.
func TestTheAdminListenerServesMetricsAndTheProfiler(t *testing.T) {
	for _, variable := range []string{"USERS_ADMIN_ADDR", "USERS_DEBUG_ADDR"} {
		t.Run(variable, func(t *testing.T) {
			s := startServerOn(t, t.TempDir()+"/users.db", map[string]string{variable: "127.0.0.1:0"})
			admin := adminServer(t, s)
			metrics := admin.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: "/metrics"})
			if metrics.Status != http.StatusOK {
				t.Fatalf("GET /metrics: %d", metrics.Status)
			}
			for _, name := range []string{"go_goroutines", "process_resident_memory_bytes"} {
				if !strings.Contains(string(metrics.Body), "\n"+name+" ") {
					t.Errorf("/metrics has no %s", name)
				}
			}
			if res := admin.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: "/debug/pprof/cmdline"}); res.Status != http.StatusOK {
				t.Errorf("GET /debug/pprof/cmdline on the admin listener: %d, want 200", res.Status)
			}
			for _, path := range []string{"/metrics", "/debug/pprof/cmdline"} {
				if res := s.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: path}); res.Status != http.StatusNotFound {
					t.Errorf("the service port answers %s with %d, want 404", path, res.Status)
				}
			}
		})
	}
}

// TestWithoutAdminAddrNoAdminListens: the admin listener is off by default.
func TestWithoutAdminAddrNoAdminListens(t *testing.T) {
	s := startServer(t)
	if lines := s.logs.Entries(map[string]any{"msg": "admin listening"}); len(lines) != 0 {
		t.Errorf("an admin listener started without -admin-addr: %v", lines)
	}
}
