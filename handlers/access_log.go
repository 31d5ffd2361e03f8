// The access log: one JSON line a request, in the shape of the service's other log lines (slog's
// JSON), written by hand because it is on every request's path and slog's JSON handler was a
// visible share of a cached REST GET (docs/PERFORMANCE.md#device-access-log).
package handlers

import (
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"time"
	"usersd/handlers/codec"

	"go.opentelemetry.io/otel/trace"
)

// appendAccessLine appends the line
//
//	{"time":"...","level":"INFO","msg":"request","request_id":"...","method":"GET","path":"/users/1",
//	 "proto":"HTTP/1.1","status":200,"bytes":123,"duration_ms":0.042}
//
// (level DEBUG for a probe) with time, when the answer ended, as slog writes it; "client_request_id" after request_id when
// the client sent an X-Request-Id that is not the request's id; "trace_id" and "span_id" after
// those when the request is a span of a trace; and "caller" after the method, the name of the key
// or the token's subject, when a valid credential was served or refused (for a scope or its rate).
func appendAccessLine(b []byte, level string, info *requestInfo, span trace.SpanContext, start, end time.Time, r *http.Request, rec *statusRecorder) []byte {
	if info == nil {
		info = &requestInfo{}
	}
	b = append(b, `{"time":"`...)
	b = end.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","level":"`...)
	b = append(b, level...)
	b = append(b, `","msg":"request","request_id":`...)
	b = appendLogString(b, info.id)
	if info.client != "" {
		b = append(b, `,"client_request_id":`...)
		b = appendLogString(b, info.client)
	}
	if span.IsValid() {
		traceID, spanID := span.TraceID(), span.SpanID()
		b = append(b, `,"trace_id":"`...)
		b = hex.AppendEncode(b, traceID[:])
		b = append(b, `","span_id":"`...)
		b = hex.AppendEncode(b, spanID[:])
		b = append(b, '"')
	}
	b = append(b, `,"method":`...)
	b = appendLogString(b, r.Method)
	if info.caller != "" {
		b = append(b, `,"caller":`...)
		b = appendLogString(b, info.caller)
	}
	b = append(b, `,"path":`...)
	b = appendLogString(b, r.URL.Path)
	b = append(b, `,"proto":`...)
	b = appendLogString(b, r.Proto)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(rec.status), 10)
	b = append(b, `,"bytes":`...)
	b = strconv.AppendInt(b, rec.bytes, 10)
	b = append(b, `,"duration_ms":`...)
	b = strconv.AppendFloat(b, float64(end.Sub(start).Microseconds())/1000, 'f', -1, 64)
	return append(b, '}', '\n')
}

// accessLevel is the level of a request's access line: DEBUG for a probe, INFO for the rest.
func accessLevel(route *routeStats) string {
	if route.probe {
		return "DEBUG"
	}
	return "INFO"
}

// appendLogString quotes s for a log line; bytes that are not UTF-8 become U+FFFD, as in slog.
func appendLogString(b []byte, s string) []byte {
	if out, ok := codec.AppendJSONString(b, s); ok {
		return out
	}
	out, _ := codec.AppendJSONString(b, strings.ToValidUTF8(s, "\uFFFD")) // valid now: it cannot decline
	return out
}
