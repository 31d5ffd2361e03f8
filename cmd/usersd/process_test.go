package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"usersd/internal/apitest"
	"usersd/internal/proctest"
)

// startProcess starts the real binary on a loopback port, with any extra flags, and waits until it
// listens.
//
// The tests of watchers cut by their write deadlines spend most of their time waiting for a
// timeout to pass; the crash tests and the resumes' load test check what was kept or delivered,
// not how fast. Each has processes or a file of its own: they run beside each other (t.Parallel),
// after the package's other tests, two at a time on two cores, the waiting of some filling with
// the work of others. Their checks read what happened from the server and its logs, or allow a
// hang detector's time, so another's load does not fail them. The tests that measure a process's
// memory or latency, or read a standby's freshness by the clock, stay serial. The tests of
// replicas on PostgreSQL, its faults and its standbys are in cmd/usersd/replicas.
func startProcess(t *testing.T, dbPath string, flags ...string) (*exec.Cmd, *testServer, <-chan []map[string]any) {
	t.Helper()
	return startProcessWithEnv(t, nil, dbPath, flags...)
}

// startProcessWithEnv is startProcess with env (NAME=value) added to the test's environment.
func startProcessWithEnv(t *testing.T, env []string, dbPath string, flags ...string) (*exec.Cmd, *testServer, <-chan []map[string]any) {
	t.Helper()
	p := proctest.Start(t, env, dbPath, flags...)
	return p.Cmd, &testServer{Server: p.Server, dbPath: dbPath}, p.Lines
}

func TestTheBinaryStopsCleanlyOnSignals(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd, s, logs := startProcess(t, filepath.Join(t.TempDir(), "users.db"))
			id := apitest.IDOf(t, s.CreateUser(t, "survivor", ""))
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("exit after %v: %v, want status 0", sig, err)
				}
			case <-time.After(15 * time.Second):
				t.Fatalf("still running 15s after %v", sig)
			}
			var stopped bool
			for _, line := range <-logs {
				stopped = stopped || line["msg"] == "stopped"
			}
			if !stopped {
				t.Fatal(`no "stopped" log line: the shutdown was not the graceful one`)
			}
			_, again, _ := startProcess(t, s.dbPath)
			if res := again.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: fmt.Sprintf("/users/%d", id)}); res.Status != 200 {
				t.Fatalf("the user written before %v: %d %s", sig, res.Status, res.Body)
			}
		})
	}
}

// TestASecondSignalStopsTheDrainAtOnce holds the drain open with a create whose body stops half
// way, signals once, then again: the process must exit at once, long before the minute that its
// flags let the drain take, with a failure status, having said why in its log.
func TestASecondSignalStopsTheDrainAtOnce(t *testing.T) {
	cases := []struct {
		name          string
		first, second syscall.Signal
		flags         []string
	}{
		{"SIGTERM, then SIGINT while requests finish", syscall.SIGTERM, syscall.SIGINT, []string{"-shutdown-grace", "1m"}},
		{"Ctrl-C twice while requests finish", syscall.SIGINT, syscall.SIGINT, []string{"-shutdown-grace", "1m"}},
		{"SIGTERM twice while health says NOT_SERVING", syscall.SIGTERM, syscall.SIGTERM, []string{"-drain-delay", "1m"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dbPath := filepath.Join(t.TempDir(), "users.db")
			cmd, s, logs := startProcess(t, dbPath, c.flags...)

			body, held := io.Pipe()
			defer held.Close()
			req, err := http.NewRequest("POST", s.BaseURL+"/users", body)
			if err != nil {
				t.Fatal(err)
			}
			req.ContentLength = 100 // more than will ever come
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("x-api-key", apitest.Key)
			go func() {
				if res, err := (&http.Client{Transport: &http.Transport{}}).Do(req); err == nil {
					res.Body.Close()
				}
			}()
			if _, err := held.Write([]byte(`{"name":`)); err != nil {
				t.Fatal(err)
			}
			time.Sleep(200 * time.Millisecond) // for the server to be reading the body

			if err := cmd.Process.Signal(c.first); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			select {
			case err := <-exited:
				t.Fatalf("exited (%v) on the first signal: the held request did not hold the drain", err)
			case <-time.After(time.Second):
			}

			signalled := time.Now()
			if err := cmd.Process.Signal(c.second); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-exited:
				var exit *exec.ExitError
				if !errors.As(err, &exit) || exit.ExitCode() != 1 {
					t.Fatalf("exit after the second signal: %v, want status 1", err)
				}
			case <-time.After(30 * time.Second): // a hang detector, half the drain it must not wait out
				t.Fatalf("still running 30s after the second signal (%v): it waits out the drain", c.second)
			}
			t.Logf("exited %s after the second signal", time.Since(signalled).Round(time.Millisecond))

			var said, stopped bool
			for _, line := range <-logs {
				said = said || line["msg"] == "stopping at once: a second signal came during the drain" && line["signal"] == c.second.String()
				stopped = stopped || line["msg"] == "stopped"
			}
			if !said || stopped {
				t.Fatalf(`logged why it stopped at once: %v, want true; logged "stopped": %v, want false`, said, stopped)
			}
			integrityCheck(t, dbPath) // the store was closed, or at least left whole
		})
	}
}

// TestDrainSaysNotServingBeforeStopping: on a stop signal, health checks say NOT_SERVING at once,
// while requests are still served for the drain delay, so a load balancer can move traffic away.
//
// What happens during the drain is checked by what the server answers and logs, not by the test's
// clock: /health must say 503 before the server stops, the requests after it must be served (a
// server past its drain listens no more), and its log must show the drain delay between the drain
// and the shutdown. (The test held the 503 to a second after the signal, and the checks to a drain
// of 2 s, which a machine busy compiling something else could break.) The delay of 5 s leaves room
// for the checks on such a machine.
func TestDrainSaysNotServingBeforeStopping(t *testing.T) {
	const drainDelay = 5 * time.Second
	s := startServerOn(t, filepath.Join(t.TempDir(), "users.db"), map[string]string{"USERS_DRAIN_DELAY": drainDelay.String()})
	if res := s.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: "/health"}); res.Status != http.StatusOK {
		t.Fatalf("/health before the signal: %d", res.Status)
	}
	stopped := make(chan struct{})
	go func() { s.stop(); close(stopped) }()
	for s.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: "/health"}).Status != http.StatusServiceUnavailable {
		select {
		case <-stopped:
			t.Fatal("/health said 200 until the server stopped: it never said it was draining")
		default:
		}
		time.Sleep(20 * time.Millisecond)
	}
	if status := grpcHealthStatus(t, s); status != 2 {
		t.Errorf("gRPC health while draining: %d, want NOT_SERVING (2)", status)
	}
	if res := s.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: "/users"}); res.Status != http.StatusOK {
		t.Errorf("a request while draining: %d, want it still served", res.Status)
	}
	<-stopped
	draining, shutdown := s.logs.Entries(map[string]any{"msg": "draining"}), s.logs.Entries(map[string]any{"msg": "shutting down"})
	if len(draining) != 1 || len(shutdown) != 1 {
		t.Fatalf("%d draining and %d shutting down log lines, want one of each:\n%s", len(draining), len(shutdown), s.logs)
	}
	began, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(draining[0]["time"]))
	ended, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(shutdown[0]["time"]))
	if ended.Sub(began) < drainDelay {
		t.Errorf("the shutdown began %v after the drain, before its delay of %v:\n%s", ended.Sub(began), drainDelay, s.logs)
	}
}

// TestMain serves as the bare server of the idle connection test when asked to, and otherwise
// runs the tests, starting the one build of usersd at once when the whole package runs (see
// proctest.Main), then checks the contract report of every answer the tests read.
func TestMain(m *testing.M) {
	if os.Getenv(bareServerEnv) != "" {
		serveBare() // the bare server of the idle connection test, never returns
	}
	flag.Parse()
	code := proctest.Main(m, flag.Lookup("test.run").Value.String(), flag.Lookup("test.list").Value.String())
	if !apitest.Report(os.Stdout, testing.Verbose()) && code == 0 {
		code = 1
	}
	os.Exit(code)
}
