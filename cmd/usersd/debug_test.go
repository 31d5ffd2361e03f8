package main

import (
	"fmt"
	"net/http"
	"testing"
)

// TestTheProfilerIsOnlyOnTheDebugListener: -debug-addr serves net/http/pprof on its own listener,
// and the service's port never serves it.
func TestTheProfilerIsOnlyOnTheDebugListener(t *testing.T) {
	s := startServerOn(t, t.TempDir()+"/users.db", map[string]string{"USERS_DEBUG_ADDR": "127.0.0.1:0"})
	lines := s.logs.entries(map[string]any{"msg": "debug listening"})
	if len(lines) != 1 {
		t.Fatalf("want one debug listening line, got %d; logs:\n%s", len(lines), s.logs)
	}
	debugURL := fmt.Sprintf("http://%s/debug/pprof/cmdline", lines[0]["addr"])
	res, err := http1Client.Get(debugURL)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Errorf("GET %s: %d, want 200", debugURL, res.StatusCode)
	}
	res, err = http1Client.Get(s.baseURL + "/debug/pprof/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNotFound {
		t.Errorf("the service port answers /debug/pprof/cmdline with %d, want 404", res.StatusCode)
	}
}

// TestWithoutDebugAddrNoProfilerListens: the debug listener is off by default.
func TestWithoutDebugAddrNoProfilerListens(t *testing.T) {
	s := startServer(t)
	if lines := s.logs.entries(map[string]any{"msg": "debug listening"}); len(lines) != 0 {
		t.Errorf("a debug listener started without -debug-addr: %v", lines)
	}
}
