package handlers

import (
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"
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
