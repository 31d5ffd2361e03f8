package main

import (
	"net"
	"path/filepath"
	"strings"
	"testing"
)

// TestHealthcheckAsksReadyz: usersd healthcheck, the container image's HEALTHCHECK, exits 0 for a
// ready server, found by -addr or by USERS_ADDR as the server takes it, and exits 1 with one line
// on stderr for an address where nothing answers.
func TestHealthcheckAsksReadyz(t *testing.T) {
	_, s, _ := startProcess(t, filepath.Join(t.TempDir(), "users.db"))
	addr := strings.TrimPrefix(s.BaseURL, "http://")
	_, port, _ := net.SplitHostPort(addr)
	for _, c := range []struct {
		name string
		env  []string
		args []string
	}{
		{"by -addr", nil, []string{"healthcheck", "-addr", addr}},
		{"by USERS_ADDR, on every interface", []string{"USERS_ADDR=:" + port}, []string{"healthcheck"}},
	} {
		stdout, stderr, code := runBinary(t, c.env, c.args...)
		if code != 0 || strings.TrimSpace(stdout) != "ready" {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want 0 and ready", c.name, code, stdout, stderr)
		}
	}

	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nowhere := closed.Addr().String()
	closed.Close()
	stdout, stderr, code := runBinary(t, nil, "healthcheck", "-addr", nowhere, "-timeout", "1s")
	if code != 1 || stdout != "" || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || !strings.Contains(stderr, "usersd healthcheck") {
		t.Errorf("nothing at %s: exit %d, stdout %q, stderr %q; want 1 and one line", nowhere, code, stdout, stderr)
	}
}
