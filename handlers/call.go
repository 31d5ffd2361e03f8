// The call of a request (users.Call): what REST and RPC requests hand the service beside their
// message, and the headers in which both answer what it gives back (the Consistency-Token of a
// write, the Idempotent-Replayed mark). A REST adapter makes the call itself; rpcCalls does it for
// the unary RPCs of the users service.
package handlers

import (
	"context"
	"net/http"

	"connectrpc.com/connect"

	"usersd/users"
)

// readContext returns the context of a REST read: it carries the token the request sent, and a
// conditional request reads from the primary, whose answer (304 or not) depends on the newest
// version. A read that says neither keeps its context as it is.
func readContext(r *http.Request) context.Context { return readContextShowing(r, false) }

// readContextShowing is readContext for a read of one user that may ask to find a deleted user
// too (showDeleted).
func readContextShowing(r *http.Request, showDeleted bool) context.Context {
	token := headerValue(r.Header, users.ConsistencyTokenHeader)
	conditional := headerValue(r.Header, "If-None-Match") != "" || headerValue(r.Header, "If-Modified-Since") != ""
	if token == "" && !conditional && !showDeleted {
		return r.Context()
	}
	return users.WithCall(r.Context(), &users.Call{ConsistencyToken: token, Primary: conditional, ShowDeleted: showDeleted})
}

// writeContext returns the context of a REST write, and its call, whose answer setCallHeaders
// writes once the service has answered.
func writeContext(r *http.Request) (context.Context, *users.Call) {
	call := &users.Call{ConsistencyToken: headerValue(r.Header, users.ConsistencyTokenHeader)}
	return users.WithCall(r.Context(), call), call
}

// watchContext returns the context of a REST watch: it carries the token the request sent, which
// the service checks as it checks a write's.
func watchContext(r *http.Request) context.Context {
	if token := headerValue(r.Header, users.ConsistencyTokenHeader); token != "" {
		return users.WithCall(r.Context(), &users.Call{ConsistencyToken: token})
	}
	return r.Context()
}

// setCallHeaders writes what the service gave back in call in h, the headers of a REST answer or
// an RPC's response headers.
func setCallHeaders(h http.Header, call *users.Call) {
	if call.AnsweredToken != "" {
		h.Set(users.ConsistencyTokenHeader, call.AnsweredToken)
	}
	if call.Replayed {
		h.Set(users.ReplayedHeader, "true")
	}
}

// rpcCalls hands every unary RPC of the users service its call, as a REST adapter does: the token
// its metadata carries, and, once the method returns, what came back in its response headers. A
// read that sends no token needs no call, and gets none.
type rpcCalls struct{}

func (rpcCalls) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		token := headerValue(req.Header(), users.ConsistencyTokenHeader)
		if token == "" && req.Spec().IdempotencyLevel == connect.IdempotencyNoSideEffects {
			return next(ctx, req)
		}
		call := &users.Call{ConsistencyToken: token}
		res, err := next(users.WithCall(ctx, call), req)
		if err == nil {
			setCallHeaders(res.Header(), call)
		}
		return res, err
	}
}

func (rpcCalls) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

// WrapStreamingHandler hands a watch the token its metadata carries, which the service checks as
// it checks a write's: a watch reads the change log on the primary, so a valid token asks nothing.
func (rpcCalls) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		if token := headerValue(conn.RequestHeader(), users.ConsistencyTokenHeader); token != "" {
			ctx = users.WithCall(ctx, &users.Call{ConsistencyToken: token})
		}
		return next(ctx, conn)
	}
}
