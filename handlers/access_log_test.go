package handlers

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"usersd/internal/apitest"
)

// TestAccessLineIsJSONInSlogsShape: each request gives one JSON line with the keys and formats of
// slog's JSON lines, whatever bytes its path holds.
func TestAccessLineIsJSONInSlogsShape(t *testing.T) {
	for _, path := range []string{"/users/1", `/a"quote\back`, "/ctl\x01\n", "/bad\xffutf8", "/zoë/\u2028"} {
		var logs syncBuffer
		h := withRequestContext(0, false, nil, withObservation(observer{accessLog: &logs, routes: &routeTable{}}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusTeapot)
			w.Write([]byte("12345"))
		})))
		r := httptest.NewRequest("GET", "/", nil)
		r.URL.Path = path
		r.Header.Set("X-Request-Id", "req-1")
		h.ServeHTTP(httptest.NewRecorder(), r)

		line := logs.String()
		if strings.Count(line, "\n") != 1 || !strings.HasSuffix(line, "\n") {
			t.Fatalf("%q: want one line, got %q", path, line)
		}
		var got map[string]any
		if err := json.Unmarshal([]byte(line), &got); err != nil {
			t.Fatalf("%q: the line is not JSON: %v\n%s", path, err, line)
		}
		wantPath := strings.ToValidUTF8(path, "\uFFFD")
		for key, want := range map[string]any{
			"level": "INFO", "msg": "request", "client_request_id": "req-1", "method": "GET", "path": wantPath,
			"proto": "HTTP/1.1", "status": 418.0, "bytes": 5.0,
		} {
			if got[key] != want {
				t.Errorf("%q: %s = %#v, want %#v", path, key, got[key], want)
			}
		}
		if id, _ := got["request_id"].(string); len(id) != 24 {
			t.Errorf("%q: request_id = %#v, want one of the service's own", path, got["request_id"])
		}
		if d, ok := got["duration_ms"].(float64); !ok || d < 0 {
			t.Errorf("%q: duration_ms = %#v", path, got["duration_ms"])
		}
		stamp, _ := got["time"].(string)
		if _, err := time.Parse(time.RFC3339Nano, stamp); err != nil {
			t.Errorf("%q: time %q is not RFC 3339: %v", path, stamp, err)
		}
	}
}

// TestAccessLineTimeIsWrittenAsSlogWritesIt: the time field has slog's exact format, so that the
// access lines and the other lines of the log sort and parse alike.
func TestAccessLineTimeIsWrittenAsSlogWritesIt(t *testing.T) {
	var slogLine bytes.Buffer
	at := time.Date(2026, 11, 21, 9, 8, 7, 123_456_789, time.Local)
	slog.New(slog.NewJSONHandler(&slogLine, nil)).Handler().Handle(t.Context(), slog.NewRecord(at, slog.LevelInfo, "request", 0))
	var fromSlog struct{ Time string }
	if err := json.Unmarshal(slogLine.Bytes(), &fromSlog); err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest("GET", "/", nil)
	var ours struct{ Time string }
	if err := json.Unmarshal(appendAccessLine(nil, "INFO", nil, trace.SpanContext{}, at.Add(-time.Millisecond), at, r, &statusRecorder{}), &ours); err != nil {
		t.Fatal(err)
	}
	if ours.Time != fromSlog.Time {
		t.Errorf("time %q, slog writes %q", ours.Time, fromSlog.Time)
	}
}

// TestProbesAreLoggedAtDebug: the access lines of health checks and probes, which every load
// balancer sends every few seconds, are DEBUG lines, left out unless asked for; other requests'
// lines are INFO.
func TestProbesAreLoggedAtDebug(t *testing.T) {
	for _, logProbes := range []bool{false, true} {
		s := startServerWith(t, Config{LogProbes: logProbes})
		for _, path := range []string{"/health", "/livez", "/readyz", "/users"} {
			s.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: path})
		}
		apitest.GRPCHealthStatus(t, s.BaseURL, "")
		time.Sleep(50 * time.Millisecond)
		for _, path := range []string{"/health", "/livez", "/readyz", "/grpc.health.v1.Health/Check"} {
			lines := s.logs.Entries(map[string]any{"msg": "request", "path": path})
			switch {
			case !logProbes && len(lines) > 0:
				t.Errorf("without LogProbes, %s was logged: %v", path, lines)
			case logProbes && (len(lines) != 1 || lines[0]["level"] != "DEBUG"):
				t.Errorf("with LogProbes, %s was logged as %v; want one DEBUG line", path, lines)
			}
		}
		if lines := s.logs.Entries(map[string]any{"msg": "request", "path": "/users", "level": "INFO"}); len(lines) != 1 {
			t.Errorf("GET /users was logged as %v; want one INFO line", lines)
		}
	}
}

// TestARefusedCallerIsNamedInTheAccessLine: a valid credential refused all the same, for a scope it
// does not hold or for its rate, is named in the access line as a served one is, so that an
// operator can tell who was refused; a credential that is not valid names nobody.
func TestARefusedCallerIsNamedInTheAccessLine(t *testing.T) {
	s := startServerWith(t, Config{Keys: scopesTestKeySet(t), RateLimit: 0.01, RateBurst: 1})
	as := func(key, method string) apitest.Response {
		return s.Do(t, apitest.HTTP1Client, request{Method: method, Path: "/users", Header: map[string]string{APIKeyHeader: key, "Content-Type": "application/json"}, Body: `{"name":"x"}`})
	}
	cases := []struct {
		key, method string
		status      int
		caller      any // nil: no caller in the line
	}{
		{scopesReaderKey, "POST", http.StatusForbidden, "dashboard"},      // users.read only
		{scopesReaderKey, "GET", http.StatusTooManyRequests, "dashboard"}, // its burst of 1 went on the 403
		{scopesWrongKey, "POST", http.StatusUnauthorized, nil},
	}
	for _, c := range cases {
		res := as(c.key, c.method)
		if res.Status != c.status {
			t.Fatalf("%s with %s: %d %s, want %d", c.method, c.key, res.Status, res.Body, c.status)
		}
		lines := s.logs.Entries(map[string]any{"msg": "request", "status": float64(c.status)})
		if len(lines) != 1 {
			t.Fatalf("%d access lines of the %d, want 1:\n%s", len(lines), c.status, s.logs)
		}
		if got := lines[0]["caller"]; got != c.caller {
			t.Errorf("the access line of the %d names caller %v, want %v", c.status, got, c.caller)
		}
	}
}
