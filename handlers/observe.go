// One place observes every request, REST and RPC alike, so that no route can be left out: it
// counts and times it, logs it, and, when tracing is on, makes it a span.
package handlers

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// observer is what withObservation reports to. Each part may be off: nil metrics, a nil tracer or
// a nil access log.
type observer struct {
	metrics   *metrics
	tracer    trace.Tracer
	accessLog io.Writer
	// logProbes writes the access lines of probes (see probeRoutes), at DEBUG; without it they are
	// left out, as a logger at INFO leaves out DEBUG lines.
	logProbes bool
	routes    *routeTable // tells a miss that is an RPC's from one of REST
}

// traceContext reads and writes the W3C traceparent and tracestate headers, which every protocol
// carries as HTTP headers (gRPC's metadata is its headers).
var traceContext propagation.TraceContext

// maxTraceState is the longest tracestate that a request's span continues. W3C Trace Context asks
// that at least 512 characters be passed on; a longer one (a client can send 32 entries of 512
// characters each, and more lines) is dropped whole rather than copied into every span.
const maxTraceState = 512

// callerTrace returns r's context in the trace of the caller's traceparent, with its tracestate
// if that is short enough.
func callerTrace(r *http.Request) context.Context {
	return traceContext.Extract(r.Context(), boundedCarrier{propagation.HeaderCarrier(r.Header)})
}

// boundedCarrier is a request's headers with a tracestate longer than maxTraceState left out.
type boundedCarrier struct{ propagation.HeaderCarrier }

func (c boundedCarrier) Get(key string) string {
	if v := c.HeaderCarrier.Get(key); !isTraceState(key) || len(v) <= maxTraceState {
		return v
	}
	return ""
}

// Values is what the propagator reads when the header has several lines: their joined length
// counts.
func (c boundedCarrier) Values(key string) []string {
	values := c.HeaderCarrier.Values(key)
	if !isTraceState(key) {
		return values
	}
	n := 0
	for _, v := range values {
		n += len(v) + 1
	}
	if n-1 > maxTraceState {
		return nil
	}
	return values
}

func isTraceState(key string) bool { return strings.EqualFold(key, "tracestate") }

// withObservation observes every request once it has been answered. The span, when tracing is
// on, continues the trace of the caller's traceparent and is in the context of everything below,
// so that each store call is a span within it. Whatever happens below (even a panic that aborts
// the answer) the request is counted, its span ended and its line logged.
func withObservation(o observer, next http.Handler) http.Handler {
	unmatched := newRouteStats(unmatchedRoute, false) // the route of every request that no route serves
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info := infoOf(r.Context())
		start := startOf(info)
		method := methodOf(r.Method)
		o.metrics.requestStarted()
		var span trace.Span
		if o.tracer != nil {
			ctx := callerTrace(r)
			ctx, span = o.tracer.Start(ctx, method.String(), trace.WithSpanKind(trace.SpanKindServer),
				trace.WithTimestamp(start), trace.WithAttributes(
					semconv.HTTPRequestMethodKey.String(method.String()),
					semconv.URLPath(r.URL.Path),
					semconv.NetworkProtocolVersion(strings.TrimPrefix(r.Proto, "HTTP/")),
				))
			r = r.WithContext(ctx)
		}
		rec := &statusRecorder{ResponseWriter: w}
		defer func() {
			end := time.Now()
			route, matched := unmatched, info != nil && info.route != nil
			if matched {
				route = info.route
			}
			// A miss is an RPC's if it is under an RPC path, or speaks an RPC protocol.
			protocol := protocolOf(r, route.rpc || !matched && o.routes.isRPC(r))
			ended := outcome{method: method, protocol: protocol, code: codeOf(protocol, info, rec.status, rec.Header())}
			o.metrics.requestEnded(route, ended, end.Sub(start))
			var spanContext trace.SpanContext
			if span != nil {
				if info != nil && info.caller != "" {
					span.SetAttributes(semconv.EnduserID(info.caller)) // a key's name or a token's subject, never a secret
				}
				endSpan(span, end, route.label, matched, ended, rec.status)
				spanContext = span.SpanContext()
			}
			if o.accessLog != nil && (!route.probe || o.logProbes) {
				line := accessLineBuffers.Get().(*[]byte)
				*line = appendAccessLine((*line)[:0], accessLevel(route), info, spanContext, start, end, r, rec)
				o.accessLog.Write(*line) // a log that cannot be written must not fail the request it describes
				accessLineBuffers.Put(line)
			}
		}()
		next.ServeHTTP(rec, r)
	})
}

var accessLineBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// endSpan names the request's span after its route, as OpenTelemetry's conventions name server
// spans ("GET /users/{id}"; "users.v1.Users/GetUser" for an RPC), records how it ended, and ends it.
// A span is an error only for a fault of the service (5xx, or an RPC code that stands for one),
// not for a client's mistake.
func endSpan(span trace.Span, end time.Time, route string, matched bool, o outcome, status int) {
	if status == 0 {
		status = http.StatusOK
	}
	span.SetAttributes(semconv.HTTPResponseStatusCode(status))
	failed := status >= 500
	if o.protocol == protocolREST {
		if matched {
			span.SetName(o.method.String() + " " + route)
			span.SetAttributes(semconv.HTTPRoute(route))
		}
	} else {
		system := semconv.RPCSystemNameGRPC
		if o.protocol == protocolConnect {
			system = semconv.RPCSystemNameConnectrpc
		}
		procedure := strings.TrimPrefix(route, "/")
		if !matched {
			procedure = "_OTHER"
		} else {
			span.SetName(procedure)
		}
		span.SetAttributes(system, semconv.RPCMethod(procedure), semconv.RPCResponseStatusCodeKey.String(strings.ToUpper(o.code.String())))
		failed = isServerFault(connect.Code(o.code - rpcCodeBase))
	}
	if failed {
		span.SetStatus(codes.Error, o.code.String())
		span.SetAttributes(semconv.ErrorTypeKey.String(o.code.String()))
	}
	span.End(trace.WithTimestamp(end))
}

// isServerFault reports whether an RPC code stands for a fault of the server rather than of the
// request, as OpenTelemetry's RPC conventions list them.
func isServerFault(c connect.Code) bool {
	switch c {
	case connect.CodeUnknown, connect.CodeDeadlineExceeded, connect.CodeUnimplemented, connect.CodeInternal,
		connect.CodeUnavailable, connect.CodeDataLoss:
		return true
	}
	return false
}

// recordCodes is the outermost interceptor of every RPC service: it records the code each call
// ends with, after the final error handler has turned any error into the one its client gets.
type recordCodes struct{}

func (recordCodes) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		res, err := next(ctx, req)
		recordRPCCode(ctx, resultCode(err))
		return res, err
	}
}

func (recordCodes) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (recordCodes) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		err := next(ctx, conn)
		recordRPCCode(ctx, resultCode(err))
		return err
	}
}

// resultCode is the code of an RPC's result: connect.CodeOf, but 0 (ok) for no error.
func resultCode(err error) connect.Code {
	if err == nil {
		return 0
	}
	return connect.CodeOf(err)
}
