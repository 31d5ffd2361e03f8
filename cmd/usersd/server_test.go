package main

import (
	"context"
	"io"
	"path/filepath"
	"testing"
	"time"

	"usersd/internal/apitest"
)

// testServer is the real program, started by run on a loopback port with its own SQLite file.
type testServer struct {
	apitest.Server // where it listens, and how a test talks to it
	dbPath         string
	logs           *apitest.Logs
	stop           func() // stops the server now instead of at the end of the test
}

// startServer runs the program on 127.0.0.1:0 with a fresh database file in a temporary folder.
func startServer(t *testing.T) *testServer {
	t.Helper()
	return startServerOn(t, filepath.Join(t.TempDir(), "users.db"), nil)
}

// startServerOn runs the program on the database file at dbPath, with extra environment variables;
// the server stops (and must stop cleanly) when the test ends.
func startServerOn(t *testing.T, dbPath string, env map[string]string) *testServer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	logs := apitest.NewLogs()
	// A variable given as "" is unset, as for a shell; USERS_API_KEYS is apitest.Key unless given.
	lookupEnv := func(name string) (string, bool) {
		if v, ok := env[name]; ok {
			return v, v != ""
		}
		if name == "USERS_API_KEYS" {
			return apitest.Key, true
		}
		return "", false
	}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, nil, []string{"-addr", "127.0.0.1:0", "-db", dbPath}, lookupEnv, logs, io.Discard)
	}()
	var addr string
	select {
	case addr = <-logs.Listening:
	case err := <-done:
		cancel()
		t.Fatalf("run ended before listening: %v\nlogs:\n%s", err, logs)
	case <-time.After(20 * time.Second):
		cancel()
		t.Fatalf("server did not listen within 20s; logs:\n%s", logs)
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		// Close the clients' idle connections first: net/http's Shutdown waits up to 5s for a
		// connection that was dialed but never used, and the clients' transports dial spares under load.
		apitest.CloseIdleConnections()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run returned %v after a clean shutdown; logs:\n%s", err, logs)
		}
	}
	t.Cleanup(stop)
	return &testServer{Server: apitest.Server{BaseURL: "http://" + addr}, dbPath: dbPath, logs: logs, stop: stop}
}

// The requests and answers of every test here, as apitest sends and reads them.
type (
	request  = apitest.Request
	response = apitest.Response
)
