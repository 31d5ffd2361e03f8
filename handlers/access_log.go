// The access log: one JSON line a request, in the shape of the service's other log lines (slog's
// JSON), written by hand because it is on every request's path and slog's JSON handler was a
// visible share of a cached REST GET (docs/PERFORMANCE.md, "What changed since the first run").
package handlers

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// withAccessLog writes one line to out for every request, after it is answered. A nil out logs
// nothing, but the answer is still recorded: the final error handler needs to know whether it
// began.
func withAccessLog(out io.Writer, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		if out == nil {
			return
		}
		line := accessLineBuffers.Get().(*[]byte)
		*line = appendAccessLine((*line)[:0], r.Context(), start, time.Now(), r, rec)
		out.Write(*line) // a log that cannot be written must not fail the request it describes
		accessLineBuffers.Put(line)
	})
}

var accessLineBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// appendAccessLine appends the line
//
//	{"time":"...","level":"INFO","msg":"request","request_id":"...","method":"GET","path":"/users/1",
//	 "proto":"HTTP/1.1","status":200,"bytes":123,"duration_ms":0.042}
//
// with time, when the answer ended, as slog writes it, and "client_request_id" after request_id
// when the client sent an X-Request-Id that is not the request's id.
func appendAccessLine(b []byte, ctx context.Context, start, end time.Time, r *http.Request, rec *statusRecorder) []byte {
	b = append(b, `{"time":"`...)
	b = end.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","level":"INFO","msg":"request","request_id":`...)
	b = appendLogString(b, requestID(ctx))
	if client := clientRequestID(ctx); client != "" {
		b = append(b, `,"client_request_id":`...)
		b = appendLogString(b, client)
	}
	b = append(b, `,"method":`...)
	b = appendLogString(b, r.Method)
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

// appendLogString quotes s for a log line; bytes that are not UTF-8 become U+FFFD, as in slog.
func appendLogString(b []byte, s string) []byte {
	if out, ok := appendJSONString(b, s); ok {
		return out
	}
	out, _ := appendJSONString(b, strings.ToValidUTF8(s, "\uFFFD")) // valid now: it cannot decline
	return out
}
