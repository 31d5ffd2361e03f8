package handlers

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"usersd/auth"
	"usersd/store/sqlstore"
)

func TestASpanContinuesTheCallersTraceWithABoundedTraceState(t *testing.T) {
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	long := strings.TrimSuffix(strings.Repeat("vendor=v"+strings.Repeat("x", 200)+",", 3), ",") // 3 entries, 628 bytes
	for _, c := range []struct {
		name  string
		lines []string
		want  string
	}{
		{"short", []string{"congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"}, "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"},
		{"too long in one line", []string{long}, ""},
		{"too long over several lines", []string{"a=" + strings.Repeat("1", 300), "b=" + strings.Repeat("2", 300)}, ""},
	} {
		r := httptest.NewRequest("GET", "/users", nil)
		r.Header.Set("traceparent", parent)
		for _, line := range c.lines {
			r.Header.Add("tracestate", line)
		}
		sc := trace.SpanContextFromContext(callerTrace(r))
		if !sc.IsValid() || sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
			t.Errorf("%s: the caller's trace was lost: %v", c.name, sc)
		}
		if got := sc.TraceState().String(); got != c.want {
			t.Errorf("%s: tracestate %q (%d bytes), want %q", c.name, got, len(got), c.want)
		}
	}
}

// TestASpanNamesItsCallerNeverTheKey: the span of a request with a credential carries enduser.id,
// the key's name, and no attribute of any span holds the key.
func TestASpanNamesItsCallerNeverTheKey(t *testing.T) {
	recorder := tracetest.NewSpanRecorder()
	provider := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorder))
	st, err := sqlstore.Open(t.Context(), filepath.Join(t.TempDir(), "users.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	keys := &auth.APIKeys{}
	key, _ := auth.ParseAPIKey(scopesFullKey + " name=importer")
	keys.Add(key)
	svc, err := New(Config{Store: st, Keys: keys, Logger: slog.New(slog.DiscardHandler), Tracing: provider})
	if err != nil {
		t.Fatal(err)
	}
	srv := startH2C(t, svc)
	c := &routeClient{baseURL: srv.URL, http: srv.Client(), key: scopesFullKey}
	c.createUser(t, "Traced")
	(&routeClient{baseURL: srv.URL, http: srv.Client()}).rest(t, http.MethodGet, "/users", "")

	var named, anonymous int
	for _, span := range recorder.Ended() {
		var caller string
		for _, a := range span.Attributes() {
			if strings.Contains(a.Value.String(), scopesFullKey) {
				t.Fatalf("span %s has the key in %s", span.Name(), a.Key)
			}
			if a.Key == semconv.EnduserIDKey {
				caller = a.Value.AsString()
			}
		}
		switch {
		case span.Name() == "POST /users" && caller == "importer":
			named++
		case span.Name() == "GET /users" && caller == "":
			anonymous++
		}
	}
	if named != 1 || anonymous != 1 {
		t.Fatalf("%d create spans named importer and %d anonymous list spans, want 1 and 1; spans: %d", named, anonymous, len(recorder.Ended()))
	}
}
