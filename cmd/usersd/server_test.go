package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// testKey is the API key every test server accepts.
const testKey = "test-key-0123456789"

// testServer is the real program, started by run on a loopback port with its own SQLite file.
type testServer struct {
	baseURL string
	dbPath  string
	logs    *logWatcher
	stop    func() // stops the server now instead of at the end of the test
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
	logs := newLogWatcher()
	getenv := func(name string) string {
		if v, ok := env[name]; ok {
			return v
		}
		if name == "USERS_API_KEYS" {
			return testKey
		}
		return ""
	}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, nil, []string{"-addr", "127.0.0.1:0", "-db", dbPath}, getenv, logs, io.Discard)
	}()
	var addr string
	select {
	case addr = <-logs.listening:
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
		// connection that was dialed but never used, and the transports dial spares under load.
		http1Client.CloseIdleConnections()
		h2cClient.CloseIdleConnections()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run returned %v after a clean shutdown; logs:\n%s", err, logs)
		}
	}
	t.Cleanup(stop)
	return &testServer{baseURL: "http://" + addr, dbPath: dbPath, logs: logs, stop: stop}
}

// logWatcher collects the program's JSON log lines and reports the address it listens on.
type logWatcher struct {
	mu        sync.Mutex
	buf       bytes.Buffer
	lines     []map[string]any
	listening chan string
}

func newLogWatcher() *logWatcher { return &logWatcher{listening: make(chan string, 1)} }

func (l *logWatcher) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	for {
		line, err := l.buf.ReadBytes('\n')
		if err != nil { // an incomplete line: keep it for the next write
			l.buf.Reset()
			l.buf.Write(line)
			break
		}
		var entry map[string]any
		if json.Unmarshal(line, &entry) != nil {
			continue
		}
		l.lines = append(l.lines, entry)
		if entry["msg"] == "listening" {
			l.listening <- fmt.Sprint(entry["addr"])
		}
	}
	return len(p), nil
}

// entries returns the log lines whose fields include every key and value of match.
func (l *logWatcher) entries(match map[string]any) []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, e := range l.lines {
		ok := true
		for k, v := range match {
			if e[k] != v {
				ok = false
			}
		}
		if ok {
			out = append(out, e)
		}
	}
	return out
}

func (l *logWatcher) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	for _, e := range l.lines {
		line, _ := json.Marshal(e)
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.String()
}

// The two ways a client reaches the port: HTTP/1.1, and HTTP/2 without TLS (h2c, prior knowledge).
// Both check every answer against the REST contract (contract_test.go).
var (
	http1Client = &http.Client{Transport: checkedTransport{&http.Transport{}}, Timeout: 30 * time.Second}
	h2cClient   = newH2CClient()
)

func newH2CClient() *http.Client {
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: checkedTransport{&http.Transport{Protocols: &protocols}}, Timeout: 30 * time.Second}
}

// transports names the clients that every REST case runs over.
var transports = []struct {
	name   string
	client *http.Client
}{{"HTTP/1.1", http1Client}, {"h2c", h2cClient}}

// response is what a test needs of an HTTP answer.
type response struct {
	status int
	header http.Header
	body   []byte
	proto  string
}

// errorMessage returns the "error" member of a {"error": "..."} body, failing the test for any other body.
func (r response) errorMessage(t *testing.T) string {
	t.Helper()
	var body map[string]any
	if err := json.Unmarshal(r.body, &body); err != nil {
		t.Fatalf("error body %q is not JSON: %v", r.body, err)
	}
	msg, ok := body["error"].(string)
	if !ok || len(body) != 1 || msg == "" {
		t.Fatalf(`error body %s is not {"error": "<message>"}`, r.body)
	}
	return msg
}

// request describes one HTTP request of a test.
type request struct {
	method, path string
	header       map[string]string
	body         string
	key          bool // send the valid API key
}

// do sends req with client and reads the whole answer.
func (s *testServer) do(t *testing.T, client *http.Client, req request) response {
	t.Helper()
	var body io.Reader
	if req.body != "" {
		body = strings.NewReader(req.body)
	}
	r, err := http.NewRequest(req.method, s.baseURL+req.path, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range req.header {
		r.Header.Set(k, v)
	}
	if req.key {
		r.Header.Set("x-api-key", testKey)
	}
	res, err := client.Do(r)
	if err != nil {
		t.Fatalf("%s %s: %v", req.method, req.path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", req.method, req.path, err)
	}
	return response{status: res.StatusCode, header: res.Header, body: b, proto: res.Proto}
}

// jsonBody is the JSON content type header of a write.
var jsonBody = map[string]string{"Content-Type": "application/json"}

// createUser creates a user over REST and returns its JSON body decoded.
func (s *testServer) createUser(t *testing.T, name, role string) map[string]any {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"name": name, "role": role})
	res := s.do(t, http1Client, request{method: "POST", path: "/users", header: jsonBody, body: string(body), key: true})
	if res.status != http.StatusCreated {
		t.Fatalf("create %q: %d %s", name, res.status, res.body)
	}
	return decodeObject(t, res.body)
}

func decodeObject(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("body %q is not a JSON object: %v", b, err)
	}
	return v
}

func decodeArray(t *testing.T, b []byte) []map[string]any {
	t.Helper()
	var v []map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("body %q is not a JSON array of objects: %v", b, err)
	}
	return v
}
