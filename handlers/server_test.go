package handlers

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"usersd/auth"
	"usersd/internal/apitest"
	"usersd/store/sqlstore"
)

// testServer is the service's handler, as New builds it, on a real listener on loopback that
// speaks HTTP/1.1 and h2c, over a SQLite file of its own: what the tests of the HTTP face's rules
// talk to, over every protocol. The real program (settings, the server's limits, signals, crashes)
// is cmd/usersd's to test.
type testServer struct {
	apitest.Server // where it listens, and how a test talks to it
	service        *Service
	logs           *apitest.Logs // the service's log and access log, unless the test gave a logger
	dbPath         string        // the SQLite file, unless the test gave a store
}

// startServer serves New's handler with the test key and a fresh database; it stops when the test
// ends.
func startServer(t *testing.T) *testServer {
	t.Helper()
	return startServerWith(t, Config{})
}

// startServerWith is startServer with cfg's settings. Its store, keys and logger are the test's
// unless cfg has them.
func startServerWith(t *testing.T, cfg Config) *testServer {
	t.Helper()
	var dbPath string
	if cfg.Store == nil {
		dbPath = filepath.Join(t.TempDir(), "users.db")
		st, err := sqlstore.Open(context.Background(), dbPath)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() }) // runs after the server's stop, registered below
		cfg.Store = st
	}
	if cfg.Keys == nil {
		cfg.Keys = testKeys(apitest.Key)
	}
	logs := apitest.NewLogs()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewJSONHandler(logs, nil))
		cfg.AccessLog = logs
	}
	svc, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(svc)
	srv.Config.ConnContext = ConnContext
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(func() {
		apitest.CloseIdleConnections()
		svc.EndWatches()
		srv.Close()
	})
	return &testServer{Server: apitest.Server{BaseURL: srv.URL}, service: svc, logs: logs, dbPath: dbPath}
}

// The requests and answers of every test here, as apitest sends and reads them.
type (
	request  = apitest.Request
	response = apitest.Response
)

// TestMain fails the package if any answer that a test read did not keep the REST contract.
func TestMain(m *testing.M) {
	code := m.Run()
	if !apitest.Report(os.Stdout, testing.Verbose()) && code == 0 {
		code = 1
	}
	os.Exit(code)
}

// testKeys returns the set of the given keys, each holding both scopes; empty strings are left out.
func testKeys(keys ...string) *auth.APIKeys {
	k := &auth.APIKeys{}
	for _, key := range keys {
		if key != "" {
			if err := k.Add(auth.NewAPIKey(key)); err != nil {
				panic(err)
			}
		}
	}
	return k
}

// testGate returns a gate of the given keys, with reads public and no rate limit.
func testGate(t testing.TB, keys ...string) *auth.Gate {
	g, err := auth.NewGate(auth.GateConfig{Keys: testKeys(keys...)})
	if err != nil {
		t.Fatal(err)
	}
	return g
}
