package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"usersd/internal/apitest"
	"usersd/store/storetest"
)

func TestARestartKeepsEveryUserAndPost(t *testing.T) {
	dbPath := filepath.Join(t.TempDir(), "data", "users.db")
	first := startServerOn(t, dbPath, nil)
	var wantUsers, wantPosts string
	for i := range 3 {
		id := apitest.IDOf(t, first.CreateUser(t, fmt.Sprintf("user %d", i), "role"))
		res := first.Do(t, apitest.HTTP1Client, request{Method: "POST", Path: fmt.Sprintf("/users/%d/posts", id), Header: apitest.JSONBody, Key: true, Body: `{"title":"t"}`})
		if res.Status != 201 {
			t.Fatalf("post: %d %s", res.Status, res.Body)
		}
		wantPosts += string(first.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: fmt.Sprintf("/users/%d/posts", id)}).Body)
	}
	wantUsers = string(first.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: "/users"}).Body)
	first.stop()

	second := startServerOn(t, dbPath, nil)
	gotUsers := string(second.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: "/users"}).Body)
	var gotPosts string
	for _, u := range apitest.DecodeArray(t, []byte(gotUsers)) {
		gotPosts += string(second.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: fmt.Sprintf("/users/%d/posts", apitest.IDOf(t, u))}).Body)
	}
	if gotUsers != wantUsers || gotPosts != wantPosts {
		t.Fatalf("after restart\nusers %s\n want %s\nposts %s\n want %s", gotUsers, wantUsers, gotPosts, wantPosts)
	}
	if created := second.CreateUser(t, "after restart", ""); apitest.IDOf(t, created) != 4 {
		t.Fatalf("the next id after a restart is %d, want 4", apitest.IDOf(t, created))
	}
}

func TestAPIKeySources(t *testing.T) {
	keysFile := filepath.Join(t.TempDir(), "keys")
	os.WriteFile(keysFile, []byte("# rotated 2026-11\n\nfile-key-1-0123456789\n  file-key-2-0123456789  \n"), 0o600)
	s := startServerOn(t, filepath.Join(t.TempDir(), "users.db"), map[string]string{
		"USERS_API_KEYS":      "env-key-1-0123456789, env-key-2-0123456789",
		"USERS_API_KEYS_FILE": keysFile,
	})
	for key, want := range map[string]int{
		"env-key-1-0123456789": 200, "env-key-2-0123456789": 200, "file-key-1-0123456789": 200, "file-key-2-0123456789": 200,
		"# rotated 2026-11": 401, "": 401, "env-key-1-0123456789,env-key-2-0123456789": 401, "env-key-1": 401, apitest.Key: 401,
	} {
		res := s.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: "/private", Header: map[string]string{"x-api-key": key}})
		if res.Status != want {
			t.Errorf("key %q: %d, want %d", key, res.Status, want)
		}
	}
	for _, line := range s.logs.Entries(nil) {
		for _, v := range line {
			if s, ok := v.(string); ok && (s == "env-key-1-0123456789" || s == "file-key-1-0123456789") {
				t.Fatalf("a configured key was logged: %v", line)
			}
		}
	}
}

func TestWithoutKeysTheServerMakesOneAndLogsItOnce(t *testing.T) {
	s := startServerOn(t, filepath.Join(t.TempDir(), "users.db"), map[string]string{"USERS_API_KEYS": ""})
	var generated []string
	for _, line := range s.logs.Entries(nil) {
		if key, ok := line["api_key"].(string); ok {
			generated = append(generated, key)
		}
	}
	if len(generated) != 1 || len(generated[0]) < 32 {
		t.Fatalf("generated keys logged: %v, want one strong key", generated)
	}
	if res := s.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: "/private"}); res.Status != 401 {
		t.Fatalf("without a key: %d", res.Status)
	}
	if res := s.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: "/private", Header: map[string]string{"x-api-key": generated[0]}}); res.Status != 200 {
		t.Fatalf("with the generated key: %d %s", res.Status, res.Body)
	}
}

// TestAnEmptyKeyListIsRefused: USERS_API_KEYS set to nothing (a secret that did not arrive) ends the
// start, as the README says, instead of running with a made-up key that no client has.
func TestAnEmptyKeyListIsRefused(t *testing.T) {
	for _, value := range []string{"", " , "} {
		logs := apitest.NewLogs()
		lookupEnv := func(name string) (string, bool) {
			if name == "USERS_API_KEYS" {
				return value, true
			}
			return "", false
		}
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second) // a start that is not refused serves until then
		err := run(ctx, nil, []string{"-addr", "127.0.0.1:0", "-db", filepath.Join(t.TempDir(), "users.db")}, lookupEnv, logs, io.Discard)
		cancel()
		if err == nil || !strings.Contains(err.Error(), "USERS_API_KEYS is set but holds no key") {
			t.Errorf("USERS_API_KEYS=%q: the start ended with %v, want it refused", value, err)
		}
		if len(logs.Entries(map[string]any{"msg": "listening"})) > 0 {
			t.Errorf("USERS_API_KEYS=%q: the server listened", value)
		}
	}
}

// TestAFailedStartMakesNoKey: a start that cannot open its store ends without making a key, so the log
// never shows a key that nothing accepts.
func TestAFailedStartMakesNoKey(t *testing.T) {
	notAFolder := filepath.Join(t.TempDir(), "not-a-folder")
	if err := os.WriteFile(notAFolder, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	logs := apitest.NewLogs()
	noEnv := func(string) (string, bool) { return "", false }
	err := run(t.Context(), nil, []string{"-addr", "127.0.0.1:0", "-db", filepath.Join(notAFolder, "users.db")}, noEnv, logs, io.Discard)
	if err == nil {
		t.Fatal("the start succeeded on a database path under a file")
	}
	for _, line := range logs.Entries(nil) {
		if _, ok := line["api_key"]; ok {
			t.Fatalf("a start that failed (%v) logged a key: %v", err, line)
		}
	}
}

func TestFlagsWinOverEnvironment(t *testing.T) {
	env := map[string]string{"USERS_ADDR": ":1", "USERS_DB": "env.db", "USERS_MAX_BODY_BYTES": "10", "USERS_SHUTDOWN_GRACE": "1s"}
	getenv := func(k string) string { return env[k] }
	fromEnv, err := parseConfig(nil, getenv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if fromEnv.addr != ":1" || fromEnv.db != "env.db" || fromEnv.maxBodyBytes != 10 || fromEnv.shutdownGrace != time.Second {
		t.Fatalf("from the environment: %+v", fromEnv)
	}
	fromFlags, err := parseConfig([]string{"-addr", ":2", "-db", "flag.db", "-max-body-bytes", "20", "-shutdown-grace", "2s"}, getenv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if fromFlags.addr != ":2" || fromFlags.db != "flag.db" || fromFlags.maxBodyBytes != 20 || fromFlags.shutdownGrace != 2*time.Second {
		t.Fatalf("from flags over the environment: %+v", fromFlags)
	}
	defaults, err := parseConfig(nil, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if defaults.addr != ":8080" || defaults.db != filepath.Join("data", "users.db") || defaults.maxBodyBytes != 1<<20 || defaults.shutdownGrace != 10*time.Second {
		t.Fatalf("defaults: %+v", defaults)
	}
	for _, bad := range [][]string{{"-max-body-bytes", "0"}, {"-shutdown-grace", "soon"}, {"extra"}, {"-nope"}} {
		if _, err := parseConfig(bad, func(string) string { return "" }, io.Discard); err == nil {
			t.Errorf("parseConfig(%q) accepted bad arguments", bad)
		}
	}
}

// TestServerLimitSettings pins the documented defaults of every limit and checks that each can be
// set by variable and by flag, and that settings that cannot work are refused at start.
func TestServerLimitSettings(t *testing.T) {
	none := func(string) string { return "" }
	defaults, err := parseConfig(nil, none, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := serverLimits{
		readHeaderTimeout: 5 * time.Second, readTimeout: 30 * time.Second, writeTimeout: 30 * time.Second,
		idleTimeout: 2 * time.Minute, maxHeaderBytes: 64 << 10, requestTimeout: 10 * time.Second,
		http2MaxStreams: 250, http2MaxFrameSize: 1 << 20, http2WriteByteTimeout: 10 * time.Second, http2PingTimeout: 30 * time.Second,
	}
	if defaults.limits != want || defaults.drainDelay != 0 || defaults.corsOrigins != nil {
		t.Fatalf("defaults: %+v, drain %s, cors %q; want %+v, 0s, none", defaults.limits, defaults.drainDelay, defaults.corsOrigins, want)
	}
	env := map[string]string{
		"USERS_READ_TIMEOUT": "7s", "USERS_HTTP2_MAX_STREAMS": "8", "USERS_HTTP2_PING_TIMEOUT": "4s",
		"USERS_CORS_ORIGINS": " https://a.example ,https://b.example,",
	}
	cfg, err := parseConfig([]string{"-request-timeout", "3s", "-drain-delay", "1s", "-http2-write-byte-timeout", "2s"}, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.limits.readTimeout != 7*time.Second || cfg.limits.http2MaxStreams != 8 || cfg.limits.requestTimeout != 3*time.Second ||
		cfg.limits.http2PingTimeout != 4*time.Second || cfg.limits.http2WriteByteTimeout != 2*time.Second ||
		cfg.drainDelay != time.Second || len(cfg.corsOrigins) != 2 || cfg.corsOrigins[0] != "https://a.example" {
		t.Fatalf("from variables and flags: %+v", cfg)
	}
	for _, bad := range [][]string{
		{"-http2-max-frame-size", "1000"}, {"-http2-max-frame-size", "16777216"}, {"-request-timeout", "0s"},
		{"-drain-delay", "-1s"}, {"-max-header-bytes", "0"}, {"-read-header-timeout", "-5s"},
		{"-http2-write-byte-timeout", "0s"}, {"-http2-ping-timeout", "-1s"},
		{"-admin-addr", "127.0.0.1:9090", "-debug-addr", "127.0.0.1:6060"},       // two addresses for one listener
		{"-db-read", "postgres://standby/users"},                                 // standbys of a SQLite file
		{"-db", "postgres://primary/users", "-db-read", "standby.internal:5432"}, // not a URL
		{"-db", "postgres://primary/users", "-db-read", "postgres://standby/users", "-db-read-max-lag", "0s"},
	} {
		if _, err := parseConfig(bad, none, io.Discard); err == nil {
			t.Errorf("parseConfig(%q) accepted a setting that cannot work", bad)
		}
	}
	reads, err := parseConfig([]string{"-db", "postgres://primary/users"}, func(k string) string {
		return map[string]string{"USERS_DB_READ": " postgres://s1/users  postgres://s2,s3/users ", "USERS_DB_READ_MAX_LAG": "250ms"}[k]
	}, io.Discard)
	if err != nil || len(reads.dbRead) != 2 || reads.dbRead[1] != "postgres://s2,s3/users" || reads.dbReadMaxLag != 250*time.Millisecond {
		t.Errorf("USERS_DB_READ of two URLs, one with two hosts: %q, max lag %v, %v", reads.dbRead, reads.dbReadMaxLag, err)
	}
	if _, err := parseConfig(nil, func(k string) string { return map[string]string{"USERS_IDLE_TIMEOUT": "often"}[k] }, io.Discard); err == nil {
		t.Error("an unparseable USERS_IDLE_TIMEOUT was accepted")
	}
}

// TestTheRequestDeadlineReachesTheStore locks the users table in PostgreSQL from outside, so that a
// create waits for it: the request's deadline cancels the query in the database, the client gets 504
// promptly, and once the lock is gone nothing of the timed-out create is left.
//
// The server's sessions have no lock_timeout or statement_timeout of their own here (usersd leaves
// what the URL sets), so that the cancel is all that can end their wait on the lock: the checks
// then need no clock but a hang detector. (They held the requests to 5 s and the queries' end to
// 3 s after them instead, under the 5 s lock_timeout, which a busy machine could break.)
func TestTheRequestDeadlineReachesTheStore(t *testing.T) {
	dsn := storetest.PostgresSchema(t)
	const app = "usersd-deadline-test" // no spaces: the URL would carry them as +
	serverDSN := storetest.WithURLParam(t, dsn, "application_name", app)
	serverDSN = storetest.WithURLParam(t, serverDSN, "lock_timeout", "0")
	serverDSN = storetest.WithURLParam(t, serverDSN, "statement_timeout", "0")
	s := startServerOn(t, serverDSN, map[string]string{"USERS_REQUEST_TIMEOUT": "300ms"})
	s.CreateUser(t, "before the lock", "")
	db := storetest.OpenPostgres(t, dsn)
	tx, err := db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.Exec(`LOCK TABLE users IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for _, req := range []request{
		{Method: "POST", Path: "/users", Header: apitest.JSONBody, Body: `{"name":"waits"}`, Key: true},
		{Method: "GET", Path: "/users"},
	} {
		res := s.Do(t, apitest.HTTP1Client, req)
		if res.Status != http.StatusGatewayTimeout || res.ErrorMessage(t) != "the request took too long" {
			t.Fatalf("%s %s behind a held lock: %d %s, want 504", req.Method, req.Path, res.Status, res.Body)
		}
	}
	t.Logf("two requests with a 300ms deadline answered 504 in %s", time.Since(start).Round(time.Millisecond))
	// The driver cancels a query by a separate cancel request, which the server acts on shortly
	// after. Nothing else ends the wait while the lock is held, so a query still waiting after a
	// hang detector's 30 s was not cancelled.
	for waiting, deadline := 1, time.Now().Add(30*time.Second); waiting > 0; time.Sleep(50 * time.Millisecond) {
		err := db.QueryRow(`SELECT COUNT(*) FROM pg_stat_activity
			WHERE application_name = $1 AND wait_event_type = 'Lock'`, app).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		if waiting > 0 && time.Now().After(deadline) {
			t.Fatalf("%d queries still wait for the lock 30s after their requests timed out: they were not cancelled", waiting)
		}
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	// A loaded machine can take longer than the 300ms deadline even without the lock (CI runs
	// packages side by side); a 504 then is the deadline doing its job, and it too must leave
	// nothing, which the count below checks.
	for attempt := 1; ; attempt++ {
		res := s.Do(t, apitest.HTTP1Client, request{Method: "POST", Path: "/users", Header: apitest.JSONBody, Body: `{"name":"after the lock"}`, Key: true})
		if res.Status == http.StatusCreated {
			break
		}
		if res.Status != http.StatusGatewayTimeout || attempt == 5 {
			t.Fatalf("create %d after the lock: %d %s", attempt, res.Status, res.Body)
		}
	}
	if n := apitest.UserCount(t, s.BaseURL); n != "2" {
		t.Fatalf("%s users, want 2: the timed-out create must leave nothing", n)
	}
}
