// What is known of a request beyond the request itself: its ids, the route that served it and the
// code it ended with, which the observer reports once the answer is done.
package handlers

import (
	"context"
	"net/http"
	"time"

	"connectrpc.com/connect"
)

type requestInfoKey struct{}

// requestInfo is what is known of a request beyond the request itself. withRequestContext puts it
// in the request's context; each field has one writer, and the observer (withObservation) reads
// them once the answer is done, so that the request's metrics, span and access log line name its
// route, code and caller, never a raw path.
type requestInfo struct {
	// id is the request's id, and client the X-Request-Id that the client sent unless that was
	// taken as the id (empty if none, or not a sane one). Written by withRequestContext.
	id, client string
	// idHeader is the X-Request-Id header's value, id, held here to save an allocation. Written by
	// withRequestContext.
	idHeader [1]string
	// start is when the request began to be served: its deadline counts from it, its duration
	// is measured from it, and its credential is checked at it (one clock read for all three).
	// Written by withRequestContext.
	start time.Time
	// deadline is the request's context when it has a deadline. Written by withRequestContext.
	deadline lazyDeadline
	// route is the route that served the request; nil when no route did. Written by the route
	// table as the route begins to serve (routeTable.add).
	route *routeStats
	// rpcCode is the code an RPC ended with, when hasRPCCode says that one was recorded. Written by
	// recordRPCCode: for what a method returns (the code interceptor) or what was refused before a
	// method ran (the error writer).
	rpcCode    connect.Code
	hasRPCCode bool
	// caller is the name of the caller that the credential check put in the request's users
	// context (users.WithCaller), for the access log and the span; empty for an anonymous request.
	// Written by authorizer.require.
	caller string
	// answer is what the request's answer holds of the answer budget. Set up, with the service's
	// budget, by withRequestContext; read and changed only by the functions of answer_budget.go.
	answer answerHold
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

// answeredByConnect reports whether connect-go answered r's call by itself, before it reached the
// service: no code was recorded for it (see recordRPCCode).
func answeredByConnect(r *http.Request) bool {
	info := infoOf(r.Context())
	return info != nil && !info.hasRPCCode
}

// recordRPCCode keeps the code that an RPC ended with: the code interceptor records it for what an
// RPC's method returns, and the error writer for what is refused before a method runs.
func recordRPCCode(ctx context.Context, code connect.Code) {
	if info := infoOf(ctx); info != nil {
		info.rpcCode, info.hasRPCCode = code, true
	}
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
