package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestARestartKeepsEveryUserAndPost(t *testing.T) {
	dbPath := filepath.Join(t.TempDir(), "data", "users.db")
	first := startServerOn(t, dbPath, nil)
	var wantUsers, wantPosts string
	for i := range 3 {
		id := idOf(t, first.createUser(t, fmt.Sprintf("user %d", i), "role"))
		res := first.do(t, http1Client, request{method: "POST", path: fmt.Sprintf("/users/%d/posts", id), header: jsonBody, key: true, body: `{"title":"t"}`})
		if res.status != 201 {
			t.Fatalf("post: %d %s", res.status, res.body)
		}
		wantPosts += string(first.do(t, http1Client, request{method: "GET", path: fmt.Sprintf("/users/%d/posts", id)}).body)
	}
	wantUsers = string(first.do(t, http1Client, request{method: "GET", path: "/users"}).body)
	first.stop()

	second := startServerOn(t, dbPath, nil)
	gotUsers := string(second.do(t, http1Client, request{method: "GET", path: "/users"}).body)
	var gotPosts string
	for _, u := range decodeArray(t, []byte(gotUsers)) {
		gotPosts += string(second.do(t, http1Client, request{method: "GET", path: fmt.Sprintf("/users/%d/posts", idOf(t, u))}).body)
	}
	if gotUsers != wantUsers || gotPosts != wantPosts {
		t.Fatalf("after restart\nusers %s\n want %s\nposts %s\n want %s", gotUsers, wantUsers, gotPosts, wantPosts)
	}
	if created := second.createUser(t, "after restart", ""); idOf(t, created) != 4 {
		t.Fatalf("the next id after a restart is %d, want 4", idOf(t, created))
	}
}

func TestAPIKeySources(t *testing.T) {
	keysFile := filepath.Join(t.TempDir(), "keys")
	os.WriteFile(keysFile, []byte("# rotated 2026-11\n\nfile-key-1\n  file-key-2  \n"), 0o600)
	s := startServerOn(t, filepath.Join(t.TempDir(), "users.db"), map[string]string{
		"USERS_API_KEYS":      "env-key-1, env-key-2",
		"USERS_API_KEYS_FILE": keysFile,
	})
	for key, want := range map[string]int{
		"env-key-1": 200, "env-key-2": 200, "file-key-1": 200, "file-key-2": 200,
		"# rotated 2026-11": 401, "": 401, "env-key-1,env-key-2": 401, "env-key": 401, testKey: 401,
	} {
		res := s.do(t, http1Client, request{method: "GET", path: "/private", header: map[string]string{"x-api-key": key}})
		if res.status != want {
			t.Errorf("key %q: %d, want %d", key, res.status, want)
		}
	}
	for _, line := range s.logs.lines {
		for _, v := range line {
			if s, ok := v.(string); ok && (s == "env-key-1" || s == "file-key-1") {
				t.Fatalf("a configured key was logged: %v", line)
			}
		}
	}
}

func TestWithoutKeysTheServerMakesOneAndLogsItOnce(t *testing.T) {
	s := startServerOn(t, filepath.Join(t.TempDir(), "users.db"), map[string]string{"USERS_API_KEYS": ""})
	var generated []string
	for _, line := range s.logs.lines {
		if key, ok := line["api_key"].(string); ok {
			generated = append(generated, key)
		}
	}
	if len(generated) != 1 || len(generated[0]) < 32 {
		t.Fatalf("generated keys logged: %v, want one strong key", generated)
	}
	if res := s.do(t, http1Client, request{method: "GET", path: "/private"}); res.status != 401 {
		t.Fatalf("without a key: %d", res.status)
	}
	if res := s.do(t, http1Client, request{method: "GET", path: "/private", header: map[string]string{"x-api-key": generated[0]}}); res.status != 200 {
		t.Fatalf("with the generated key: %d %s", res.status, res.body)
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
