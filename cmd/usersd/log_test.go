package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"usersd/internal/apitest"
	"usersd/internal/proctest"
)

// TestLogLevels: -log-level debug adds the access lines of probes (DEBUG), info (the default)
// logs every other request, warn leaves out every access line.
func TestLogLevels(t *testing.T) {
	for _, c := range []struct {
		level                string
		probeLines, reqLines int
	}{{"debug", 1, 1}, {"info", 0, 1}} {
		t.Run(c.level, func(t *testing.T) {
			s := startServerOn(t, filepath.Join(t.TempDir(), "users.db"), map[string]string{"USERS_LOG_LEVEL": c.level})
			s.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: "/readyz"})
			s.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: "/users"})
			s.stop() // writes the access lines still batched
			probe := s.logs.Entries(map[string]any{"msg": "request", "path": "/readyz"})
			req := s.logs.Entries(map[string]any{"msg": "request", "path": "/users"})
			if len(probe) != c.probeLines || len(req) != c.reqLines || len(probe) == 1 && probe[0]["level"] != "DEBUG" {
				t.Fatalf("at %s: probe lines %v, request lines %v; want %d and %d", c.level, probe, req, c.probeLines, c.reqLines)
			}
		})
	}
	// At warn not even "listening" is logged: the process is found at a port chosen beforehand.
	t.Run("warn", func(t *testing.T) {
		cmd, s, stdout, _ := startOnAPort(t, []string{"USERS_API_KEYS=" + apitest.Key}, "-log-level", "warn")
		s.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: "/users"})
		stopProcess(cmd)
		if strings.Contains(stdout.String(), `"msg":"request"`) {
			t.Fatalf("access lines at warn:\n%s", stdout.String())
		}
	})
	if _, stderr, code := runBinary(t, nil, "-log-level", "loud"); code != 1 || !strings.Contains(stderr, "-log-level takes debug, info, warn or error") {
		t.Fatalf("-log-level loud: exit %d, %q", code, stderr)
	}
}

// TestEveryLineOnStdoutIsJSON: what ends a start (a database it cannot open) is a JSON line on
// stdout as well as a line on stderr, and OpenTelemetry's own errors (an export refused) are
// JSON lines of the service's log, not plain text on stderr.
func TestEveryLineOnStdoutIsJSON(t *testing.T) {
	t.Run("a failed start", func(t *testing.T) {
		stdout, stderr, code := runBinary(t, []string{"USERS_API_KEYS=" + apitest.Key}, "-db", "/proc/no/such/folder/users.db")
		if code != 1 || strings.Count(stderr, "\n") != 1 {
			t.Fatalf("exit %d, stderr %q", code, stderr)
		}
		lines := jsonLines(t, stdout)
		last := lines[len(lines)-1]
		if last["level"] != "ERROR" || last["msg"] != "exiting on an error" || !strings.Contains(last["error"].(string), "users.db") {
			t.Fatalf("the last line %v; want an ERROR line saying why it stopped", last)
		}
	})
	t.Run("an export of spans refused", func(t *testing.T) {
		refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "no", http.StatusBadRequest) // not to be retried: the error is reported at once
		}))
		defer refusing.Close()
		cmd, s, stdout, stderr := startOnAPort(t, []string{"USERS_API_KEYS=" + apitest.Key,
			"OTEL_EXPORTER_OTLP_ENDPOINT=" + refusing.URL, "OTEL_BSP_SCHEDULE_DELAY=100"})
		s.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: "/users"}) // a span to export
		time.Sleep(time.Second)                                              // the export, refused
		stopProcess(cmd)
		if stderr.Len() > 0 {
			t.Fatalf("plain text on stderr: %q", stderr.String())
		}
		jsonLines(t, stdout.String())
	})
}

// jsonLines decodes every line of out, failing the test for one that is not a JSON object.
func jsonLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	scanner := bufio.NewScanner(strings.NewReader(out))
	for scanner.Scan() {
		var line map[string]any
		if err := json.Unmarshal(scanner.Bytes(), &line); err != nil {
			t.Fatalf("a line that is not JSON: %q", scanner.Text())
		}
		lines = append(lines, line)
	}
	if len(lines) == 0 {
		t.Fatal("no line on stdout")
	}
	return lines
}

// startOnAPort starts the binary on a free port chosen beforehand (for a run whose log may not say
// where it listens), with env as its whole environment, and waits until /livez answers; its
// output is in the buffers once it has stopped.
func startOnAPort(t *testing.T, env []string, args ...string) (cmd *exec.Cmd, s apitest.Server, stdout, stderr *bytes.Buffer) {
	t.Helper()
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := free.Addr().String()
	free.Close()
	cmd = exec.Command(proctest.Binary(t), append([]string{"-addr", addr, "-db", filepath.Join(t.TempDir(), "users.db")}, args...)...)
	cmd.Env = env
	stdout, stderr = &bytes.Buffer{}, &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	s = apitest.Server{BaseURL: "http://" + addr}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if res, err := http.Get(s.BaseURL + "/livez"); err == nil {
			res.Body.Close()
			return cmd, s, stdout, stderr
		}
		if time.Now().After(deadline) {
			t.Fatal("not listening within 20 s")
		}
	}
}

// stopProcess sends SIGTERM and waits for the process to end.
func stopProcess(cmd *exec.Cmd) {
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()
}
