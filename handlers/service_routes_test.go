package handlers

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"usersd/internal/apitest"
)

func TestServiceRoutes(t *testing.T) {
	s := startServer(t)
	for _, tr := range apitest.Transports {
		t.Run(tr.Name, func(t *testing.T) {
			c := tr.Client

			t.Run("health answers exactly ok true", func(t *testing.T) {
				res := s.Do(t, c, request{Method: "GET", Path: "/health"})
				if res.Status != 200 || string(res.Body) != `{"ok":true}` {
					t.Fatalf("%d %s", res.Status, res.Body)
				}
			})

			t.Run("info describes the request and redacts credentials", func(t *testing.T) {
				res := s.Do(t, c, request{Method: "GET", Path: "/info?x=1", Header: map[string]string{
					"X-Api-Key": "secret-1", "Authorization": "Bearer secret-2", "Proxy-Authorization": "Basic secret-3",
					"Cookie": "session=secret-4", "X-Custom": "visible", "X-Auth-Token": "secret-5", "Api-Key": "secret-6",
					"X-Amz-Security-Token": "secret-7", "X-Goog-Api-Key": "secret-8", "X-CSRF-Token": "secret-9",
					"X-Session-Id": "secret-10", "X-Hub-Signature-256": "secret-11",
				}})
				if strings.Contains(string(res.Body), "secret") {
					t.Fatalf("a credential leaked: %s", res.Body)
				}
				var info struct {
					Method  string            `json:"method"`
					Path    string            `json:"path"`
					Headers map[string]string `json:"headers"`
				}
				if err := json.Unmarshal(res.Body, &info); err != nil {
					t.Fatal(err)
				}
				if info.Method != "GET" || info.Path != "/info" || info.Headers["x-custom"] != "visible" || info.Headers["host"] == "" {
					t.Fatalf("info %+v", info)
				}
				for _, name := range []string{"x-api-key", "authorization", "proxy-authorization", "cookie", "x-auth-token", "api-key",
					"x-amz-security-token", "x-goog-api-key", "x-csrf-token", "x-session-id", "x-hub-signature-256"} {
					if info.Headers[name] != "[redacted]" {
						t.Errorf("header %s is %q, want [redacted]", name, info.Headers[name])
					}
				}
			})

			t.Run("info joins several values of one header", func(t *testing.T) {
				r, _ := http.NewRequest("GET", s.BaseURL+"/info", nil)
				r.Header.Add("X-Multi", "a")
				r.Header.Add("X-Multi", "b")
				res, err := c.Do(r)
				if err != nil {
					t.Fatal(err)
				}
				defer res.Body.Close()
				var info struct{ Headers map[string]string }
				json.NewDecoder(res.Body).Decode(&info)
				if info.Headers["x-multi"] != "a, b" {
					t.Fatalf("x-multi %q, want \"a, b\"", info.Headers["x-multi"])
				}
			})

			t.Run("echo sends back any JSON without a key", func(t *testing.T) {
				res := s.Do(t, c, request{Method: "POST", Path: "/echo", Header: apitest.JSONBody, Body: `{"a": [1, "two", null], "b": {"c": true}}`})
				if res.Status != 200 || string(res.Body) != `{"youSent":{"a":[1,"two",null],"b":{"c":true}}}` {
					t.Fatalf("%d %s", res.Status, res.Body)
				}
				scalar := s.Do(t, c, request{Method: "POST", Path: "/echo", Header: apitest.JSONBody, Body: `42`})
				if scalar.Status != 200 || string(scalar.Body) != `{"youSent":42}` {
					t.Fatalf("%d %s", scalar.Status, scalar.Body)
				}
			})

			t.Run("private answers with the key", func(t *testing.T) {
				res := s.Do(t, c, request{Method: "GET", Path: "/private", Key: true})
				var body map[string]any
				json.Unmarshal(res.Body, &body)
				if _, isNumber := body["secretData"].(float64); res.Status != 200 || !isNumber || len(body) != 1 {
					t.Fatalf("%d %s", res.Status, res.Body)
				}
			})

			t.Run("boom is a fixed 500 and its detail is logged with the request id", func(t *testing.T) {
				res := s.Do(t, c, request{Method: "GET", Path: "/boom"})
				if res.Status != 500 || string(res.Body) != `{"error":"Internal Server Error","reason":"INTERNAL"}` {
					t.Fatalf("%d %s", res.Status, res.Body)
				}
				id := res.Header.Get("X-Request-Id")
				faults := s.logs.Entries(map[string]any{"request_id": id, "level": "ERROR"})
				if id == "" || len(faults) != 1 || !strings.Contains(faults[0]["error"].(string), "boom: this route fails on purpose") {
					t.Fatalf("request %q: error log lines %v", id, faults)
				}
			})

			t.Run("the page is served at the root", func(t *testing.T) {
				res := s.Do(t, c, request{Method: "GET", Path: "/"})
				if res.Status != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") || !strings.Contains(string(res.Body), "<title>Users · usersd</title>") {
					t.Fatalf("%d %s %.80s", res.Status, res.Header.Get("Content-Type"), res.Body)
				}
				index := s.Do(t, c, request{Method: "GET", Path: "/index.html"}) // redirected to "/", which the client follows
				if index.Status != 200 || string(index.Body) != string(res.Body) {
					t.Fatalf("/index.html: %d, want the page", index.Status)
				}
			})
		})
	}
}

// TestRequestIDs: by default the service makes every request's id itself, and keeps a client's
// sane X-Request-Id only as client_request_id in the access log; with -trust-request-id, for a
// proxy that sets the header, a sane one is the id. An unsafe one is never used or logged.
func TestRequestIDs(t *testing.T) {
	sent := map[string]string{"X-Request-Id": "lb-1234.abc"}
	t.Run("made by the service", func(t *testing.T) {
		s := startServer(t)
		res := s.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: "/users", Header: sent})
		id := res.Header.Get("X-Request-Id")
		if len(id) != 24 || id == "lb-1234.abc" {
			t.Fatalf("a client's X-Request-Id became the id: got %q", id)
		}
		line := waitForAccessLine(t, s, id)
		if line["client_request_id"] != "lb-1234.abc" {
			t.Fatalf("the access line does not keep the client's id: %v", line)
		}
	})
	t.Run("trusted from a proxy", func(t *testing.T) {
		s := startServerWith(t, Config{TrustRequestID: true})
		if got := s.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: "/users", Header: sent}).Header.Get("X-Request-Id"); got != "lb-1234.abc" {
			t.Fatalf("a sane id from a trusted proxy is kept: got %q", got)
		}
		if line := waitForAccessLine(t, s, "lb-1234.abc"); line["client_request_id"] != nil {
			t.Fatalf("a trusted id is logged twice: %v", line)
		}
		forged := s.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: "/users", Header: map[string]string{"X-Request-Id": `x" "level":"ERROR`}})
		id := forged.Header.Get("X-Request-Id")
		if len(id) != 24 {
			t.Fatalf("an unsafe id is replaced: got %q", id)
		}
		if line := waitForAccessLine(t, s, id); line["client_request_id"] != nil {
			t.Fatalf("an unsafe id was logged: %v", line)
		}
	})
}

// waitForAccessLine returns the access log line of the request with id, which the observer writes
// once the answer is done: the client may read the answer a moment before. The wait is a hang
// detector, not a bound on speed: a busy machine may take its time.
func waitForAccessLine(t *testing.T, s *testServer, id string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		lines := s.logs.Entries(map[string]any{"msg": "request", "request_id": id})
		if len(lines) == 1 {
			return lines[0]
		}
		if len(lines) > 1 || time.Now().After(deadline) {
			t.Fatalf("access log lines for request %s: %v", id, lines)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
