package handlers

import (
	"context"
	"net/http"

	"connectrpc.com/connect"
)

type requestInfoKey struct{}

// requestInfo is what is known of a request beyond the request itself. withRequestContext puts it
// in the request's context, with the request's ids; the layers below fill in what they learn (the
// route that served it, the RPC code it ended with), which withObservation reads once the answer
// is done, so that the request's metrics and span name the route and the code, never a raw path.
type requestInfo struct {
	// id is the request's id; client is the X-Request-Id that the client sent, unless that was
	// taken as the id (empty if none, or not a sane one).
	id, client string
	// route is the route that served the request; nil when no route did.
	route *routeStats
	// rpcCode is the code an RPC ended with, when hasRPCCode says that one was recorded.
	rpcCode    connect.Code
	hasRPCCode bool
	// writer is the connection's own writer of the answer, below every wrapper: what a stream sets
	// its deadlines on (an RPC's method is handed no writer).
	writer http.ResponseWriter
	// flushes gates the flushes of a stream's answer; nil for a request that is not a stream.
	flushes *flushGate
}

// infoOf returns the request's info, or nil outside a request.
func infoOf(ctx context.Context) *requestInfo {
	info, _ := ctx.Value(requestInfoKey{}).(*requestInfo)
	return info
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
