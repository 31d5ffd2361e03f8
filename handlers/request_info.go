// What is known of a request beyond the request itself: its ids, the route that served it and the
// code it ended with, which the observer reports once the answer is done.
package handlers

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"connectrpc.com/connect"
)

type requestInfoKey struct{}

// requestInfo is what is known of a request beyond the request itself. withRequestContext puts it in
// the request's context, with the request's ids. Two fields are learnt below, each written in one
// place: the route table sets route as it serves a request, and recordRPCCode the code an RPC ended
// with. withObservation reads them once the answer is done, so that the request's metrics and span
// name the route and the code, never a raw path.
type requestInfo struct {
	// id is the request's id; client is the X-Request-Id that the client sent, unless that was
	// taken as the id (empty if none, or not a sane one).
	id, client string
	// deadline is the request's context when it has a deadline (withRequestContext).
	deadline lazyDeadline
	// idHeader is the X-Request-Id header's value, id, held here to save an allocation.
	idHeader [1]string
	// start is when the request began to be served: its deadline counts from it, its duration
	// is measured from it, and its credential is checked at it (one clock read for all three).
	start time.Time
	// route is the route that served the request; nil when no route did.
	route *routeStats
	// rpcCode is the code an RPC ended with, when hasRPCCode says that one was recorded.
	rpcCode    connect.Code
	hasRPCCode bool
	// budget is the service's answer memory budget, and answerHeld what this request's answer
	// holds of it until the request ends (see holdAnswer).
	budget     *answerBudget
	answerHeld int64
	// caller names who made the request (a key's name), set by the credential check; empty for an
	// anonymous one.
	caller string
}

// infoOf returns the request's info, or nil outside a request.
func infoOf(ctx context.Context) *requestInfo {
	info, _ := ctx.Value(requestInfoKey{}).(*requestInfo)
	return info
}

// startOf returns when the request of info began to be served (withRequestContext read the clock a
// moment ago), or now outside a request (info nil).
func startOf(info *requestInfo) time.Time {
	if info != nil {
		return info.start
	}
	return time.Now()
}

// requestID returns the id of the request that ctx belongs to, or "" outside a request.
func requestID(ctx context.Context) string {
	if info := infoOf(ctx); info != nil {
		return info.id
	}
	return ""
}

// recordRPCCode keeps the code that an RPC ended with: the code interceptor records it for what an
// RPC's method returns, and the error writer for what is refused before a method runs.
func recordRPCCode(ctx context.Context, code connect.Code) {
	if info := infoOf(ctx); info != nil {
		info.rpcCode, info.hasRPCCode = code, true
	}
}

// logWithRequestIDs makes every line logged with a request's context carry the request's id, so
// that no caller has to add it (the service's own lines included).
func logWithRequestIDs(h slog.Handler) slog.Handler { return requestIDLogHandler{h} }

type requestIDLogHandler struct{ slog.Handler }

func (h requestIDLogHandler) Handle(ctx context.Context, record slog.Record) error {
	if id := requestID(ctx); id != "" {
		record.AddAttrs(slog.String("request_id", id))
	}
	return h.Handler.Handle(ctx, record)
}

func (h requestIDLogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return requestIDLogHandler{h.Handler.WithAttrs(attrs)}
}

func (h requestIDLogHandler) WithGroup(name string) slog.Handler {
	return requestIDLogHandler{h.Handler.WithGroup(name)}
}

// headerValue is h.Get(key) for a key already in canonical form (a constant of this package):
// net/http stores every request header under its canonical name, and Get would check and
// canonicalise the key again, byte by byte, on every read of every request.
func headerValue(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}
