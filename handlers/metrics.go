// The service's own metrics, recorded for every request by withObservation and for idempotency
// and API keys where they are decided. Every label value comes from a fixed set (the registered
// routes, the methods and protocols the service knows, HTTP statuses and RPC codes), never from
// what a client sends as it is, so that no client can make a series.
package handlers

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
)

// Label values for what no route serves and for methods the service has no route for.
const (
	unmatchedRoute = "unmatched"
	otherMethod    = "other"
)

// The protocols a request may speak, as the protocol label names them.
const (
	protocolREST    = "rest"
	protocolConnect = "connect"
	protocolGRPC    = "grpc"
	protocolGRPCWeb = "grpc-web"
)

// durationBuckets are the upper bounds, in seconds, of the request and store duration histograms:
// most answers take well under a millisecond, so the buckets start there and reach the request
// deadline's order of magnitude.
var durationBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// metrics are the service's collectors. A nil *metrics records nothing, so that the handler also
// works without a registry.
type metrics struct {
	requests    *prometheus.CounterVec
	durations   *prometheus.HistogramVec
	inFlight    *prometheus.GaugeVec
	replays     prometheus.Counter
	refusedKeys *prometheus.CounterVec
}

// newMetrics registers the service's collectors with registerer; a nil registerer means no metrics.
func newMetrics(registerer prometheus.Registerer) (*metrics, error) {
	if registerer == nil {
		return nil, nil
	}
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "usersd_requests_total",
			Help: "Requests answered, by route pattern, method, protocol (rest, connect, grpc, grpc-web) and code: the HTTP status on REST, the RPC code on RPC.",
		}, []string{"route", "method", "protocol", "code"}),
		durations: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "usersd_request_duration_seconds",
			Help:    "Time from a request's headers to the end of its answer, by route pattern, method and protocol.",
			Buckets: durationBuckets,
		}, []string{"route", "method", "protocol"}),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "usersd_requests_in_flight",
			Help: "Requests being answered now, by protocol; a stream counts while it is open.",
		}, []string{"protocol"}),
		replays: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "usersd_idempotent_replays_total",
			Help: "Creates answered with the kept answer of an earlier request with the same idempotency key.",
		}),
		refusedKeys: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "usersd_refused_keys_total",
			Help: "Requests refused for their key: key is api_key (reason missing or invalid) or idempotency_key (reason in_progress or reused).",
		}, []string{"key", "reason"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.durations, m.inFlight, m.replays, m.refusedKeys} {
		if err := registerer.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// requestStarted counts a request in flight until requestEnded.
func (m *metrics) requestStarted(protocol string) {
	if m != nil {
		m.inFlight.WithLabelValues(protocol).Inc()
	}
}

// requestEnded counts and times a request that has been answered.
func (m *metrics) requestEnded(route, method, protocol, code string, took time.Duration) {
	if m == nil {
		return
	}
	m.inFlight.WithLabelValues(protocol).Dec()
	m.requests.WithLabelValues(route, method, protocol, code).Inc()
	m.durations.WithLabelValues(route, method, protocol).Observe(took.Seconds())
}

func (m *metrics) idempotentReplay() {
	if m != nil {
		m.replays.Inc()
	}
}

// refusedKey counts a request refused for its API key or its idempotency key.
func (m *metrics) refusedKey(key, reason string) {
	if m != nil {
		m.refusedKeys.WithLabelValues(key, reason).Inc()
	}
}

// methodLabel is the request's method if the service has routes for it, or "other".
func methodLabel(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions:
		return method
	}
	return otherMethod
}

// codeLabel is what a request ended with as its client sees it: the HTTP status on REST, the RPC
// code on RPC. An RPC refused before its method ran (connect could not read its message, say) has
// no recorded code; its code is then read from the answer, as a client would read it.
func codeLabel(protocol string, info *requestInfo, status int, header http.Header) string {
	if status == 0 {
		status = http.StatusOK // what net/http sends for an answer that wrote nothing
	}
	if protocol == protocolREST {
		return strconv.Itoa(status)
	}
	if info != nil && info.hasRPCCode {
		return rpcCodeName(info.rpcCode)
	}
	for _, name := range []string{"Grpc-Status", http.TrailerPrefix + "Grpc-Status"} {
		if value := header.Get(name); value != "" {
			code, err := strconv.ParseUint(value, 10, 32)
			if err != nil || code > uint64(connect.CodeUnauthenticated) {
				return connect.CodeUnknown.String()
			}
			return rpcCodeName(connect.Code(code))
		}
	}
	if code, ok := connectCodeOfStatus[status]; ok {
		return rpcCodeName(code)
	}
	return connect.CodeUnknown.String()
}

// rpcCodeName names code as the Connect protocol does; success is "ok".
func rpcCodeName(code connect.Code) string {
	if code == 0 {
		return "ok"
	}
	return code.String()
}

// connectCodeOfStatus reads the code of a Connect answer from its HTTP status, for the answers whose
// code was not recorded: the inverse of the Connect protocol's code-to-status table, where a status
// stands for one code, and the code connect itself gives the others.
var connectCodeOfStatus = map[int]connect.Code{
	http.StatusOK:                  0,
	http.StatusBadRequest:          connect.CodeInvalidArgument,
	http.StatusUnauthorized:        connect.CodeUnauthenticated,
	http.StatusForbidden:           connect.CodePermissionDenied,
	http.StatusNotFound:            connect.CodeNotFound,
	http.StatusConflict:            connect.CodeAborted,
	http.StatusTooManyRequests:     connect.CodeResourceExhausted,
	499:                            connect.CodeCanceled, // the Connect protocol's "client closed request"
	http.StatusInternalServerError: connect.CodeInternal,
	http.StatusNotImplemented:      connect.CodeUnimplemented,
	http.StatusServiceUnavailable:  connect.CodeUnavailable,
	http.StatusGatewayTimeout:      connect.CodeDeadlineExceeded,
}

// protocolOf names the protocol a request speaks: gRPC and gRPC-Web by their content types, Connect
// for any other request to an RPC path (or that says it speaks Connect), REST for the rest.
func (ew *errorWriter) protocolOf(r *http.Request) string {
	contentType := r.Header.Get("Content-Type")
	switch {
	case strings.HasPrefix(contentType, "application/grpc-web"):
		return protocolGRPCWeb
	case strings.HasPrefix(contentType, "application/grpc"):
		return protocolGRPC
	case r.Header.Get("Connect-Protocol-Version") != "" || ew.underRPCPath(r.URL.Path):
		return protocolConnect
	}
	return protocolREST
}
