// The service's own metrics, recorded for every request by withObservation and for idempotency
// and API keys where they are decided. Every label value comes from a fixed set (the registered
// routes, the methods and protocols the service knows, HTTP statuses and RPC codes), never from
// what a client sends as it is, so that no client can make a series.
package handlers

import (
	"maps"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"

	"usersd/users"
)

// Label values for what no route serves and for methods the service has no route for.
const (
	unmatchedRoute = "unmatched"
	otherMethod    = "other"
)

// protocol is what a request speaks, as the protocol label names it.
type protocol uint8

const (
	protocolREST protocol = iota
	protocolConnect
	protocolGRPC
	protocolGRPCWeb
	protocolCount
)

var protocolNames = [protocolCount]string{protocolREST: "rest", protocolConnect: "connect", protocolGRPC: "grpc", protocolGRPCWeb: "grpc-web"}

func (p protocol) String() string { return protocolNames[p] }

// durationBuckets are the upper bounds, in seconds, of the request and store duration histograms:
// most answers take well under a millisecond, so the buckets start there and reach the request
// deadline's order of magnitude.
var durationBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// metrics are the service's collectors. A nil *metrics records nothing, so that the handler also
// works without a registry.
type metrics struct {
	requests    *prometheus.CounterVec
	durations   *prometheus.HistogramVec
	inFlight    prometheus.Gauge
	replays     prometheus.Counter
	refusedKeys *prometheus.CounterVec
	// Requests refused before their route ran, by reason (never by caller: callers are unbounded).
	refusedRequests *prometheus.CounterVec
	// Watches of the change log (users.Service.Watch).
	watchers   prometheus.Gauge
	eventsSent prometheus.Counter
	watchesCut *prometheus.CounterVec
}

// probeRoutes are the routes of health checks and probes, by label.
var probeRoutes = map[string]bool{
	"/health": true, "/livez": true, "/readyz": true, "/grpc.health.v1.Health/Check": true, "/grpc.health.v1.Health/Watch": true, "/grpc.health.v1.Health/List": true,
}

// routeStats is a route as the metrics see it: its label, whether it serves an RPC, and the series
// of each outcome it has had so far. The route table makes one for each route and one for the
// misses; a request finds its series there by a small key, not by hashing four label values.
type routeStats struct {
	label string
	rpc   bool
	// probe says that health checks call the route, every few seconds from every load balancer:
	// its access lines are DEBUG (see probeRoutes).
	probe bool
	// series is replaced, never changed, so that a read needs no lock; mu orders the additions.
	series atomic.Pointer[map[outcome]series]
	mu     sync.Mutex
}

func newRouteStats(label string, rpc bool) *routeStats {
	r := &routeStats{label: label, rpc: rpc, probe: probeRoutes[label]}
	r.series.Store(&map[outcome]series{})
	return r
}

// outcome is how a request to a route ended: the rest of its series' labels.
type outcome struct {
	method   method
	protocol protocol
	code     code
}

// series is the counter and the histogram of one route's outcome.
type series struct {
	requests prometheus.Counter
	duration prometheus.Observer
}

// method is a request's method as the method label names it: one the service has routes for, or
// other.
type method uint8

var methodNames = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
	http.MethodDelete, http.MethodOptions, otherMethod}

func methodOf(name string) method {
	for i, known := range methodNames[:len(methodNames)-1] {
		if name == known {
			return method(i)
		}
	}
	return method(len(methodNames) - 1)
}

func (m method) String() string { return methodNames[m] }

// code is what a request ended with: an HTTP status on REST, an RPC code on RPC (see codeOf).
type code int32

// rpcCodeBase offsets RPC codes from HTTP statuses in a code.
const rpcCodeBase = 1000

func rpcCode(c connect.Code) code { return rpcCodeBase + code(c) }

// String is the code's label value: the status's digits, or the RPC code's name ("ok" for success).
func (c code) String() string {
	if c < rpcCodeBase {
		return strconv.Itoa(int(c))
	}
	if c == rpcCodeBase {
		return "ok"
	}
	return connect.Code(c - rpcCodeBase).String()
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
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "usersd_requests_in_flight",
			Help: "Requests being answered now; a stream counts while it is open.",
		}),
		replays: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "usersd_idempotent_replays_total",
			Help: "Creates answered with the kept answer of an earlier request with the same idempotency key.",
		}),
		refusedKeys: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "usersd_refused_keys_total",
			Help: "Requests refused for their key: key is api_key (reason missing or invalid) or idempotency_key (reason in_progress or reused).",
		}, []string{"key", "reason"}),
		refusedRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "usersd_refused_requests_total",
			Help: "Requests refused before their route ran, by reason: no_credential, bad_credential, scope (the credential lacks the scope the route needs) or rate (the caller is over its rate limit).",
		}, []string{"reason"}),
		watchers: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "usersd_watchers",
			Help: "Watches of users open now (WatchUsers on every protocol, and GET /users/events).",
		}),
		eventsSent: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "usersd_watch_events_sent_total",
			Help: "Changes of users sent to watchers, summed over watchers; heartbeats not included.",
		}),
		watchesCut: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "usersd_watches_refused_total",
			Help: "Watches refused or ended by the server, by reason: too_many (the watcher limit), too_slow (the watcher fell too far behind), stopping (the server stops).",
		}, []string{"reason"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.durations, m.inFlight, m.replays, m.refusedKeys, m.refusedRequests, m.watchers, m.eventsSent, m.watchesCut} {
		if err := registerer.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// requestStarted counts a request in flight until requestEnded.
func (m *metrics) requestStarted() {
	if m != nil {
		m.inFlight.Inc()
	}
}

// requestEnded counts and times a request that route answered.
func (m *metrics) requestEnded(route *routeStats, o outcome, took time.Duration) {
	if m == nil {
		return
	}
	m.inFlight.Dec()
	s, ok := (*route.series.Load())[o]
	if !ok {
		s = m.addSeries(route, o)
	}
	s.requests.Inc()
	s.duration.Observe(took.Seconds())
}

// addSeries adds the series of a route's outcome not seen before, on a copy of the route's map.
func (m *metrics) addSeries(route *routeStats, o outcome) series {
	route.mu.Lock()
	defer route.mu.Unlock()
	old := route.series.Load()
	if s, ok := (*old)[o]; ok { // added meanwhile
		return s
	}
	s := series{
		requests: m.requests.WithLabelValues(route.label, o.method.String(), o.protocol.String(), o.code.String()),
		duration: m.durations.WithLabelValues(route.label, o.method.String(), o.protocol.String()),
	}
	added := make(map[outcome]series, len(*old)+1)
	maps.Copy(added, *old)
	added[o] = s
	route.series.Store(&added)
	return s
}

// The service's own counts (users.Metrics).
var _ users.Metrics = (*metrics)(nil)

func (m *metrics) IdempotentReplay() {
	if m != nil {
		m.replays.Inc()
	}
}

func (m *metrics) IdempotencyKeyRefused(reason string) { m.refusedKey("idempotency_key", reason) }

func (m *metrics) WatchStarted() {
	if m != nil {
		m.watchers.Inc()
	}
}

func (m *metrics) WatchEnded() {
	if m != nil {
		m.watchers.Dec()
	}
}

func (m *metrics) EventsSent(n int) {
	if m != nil {
		m.eventsSent.Add(float64(n))
	}
}

func (m *metrics) WatchCut(reason string) {
	if m != nil {
		m.watchesCut.WithLabelValues(reason).Inc()
	}
}

// refusedRequest counts a request refused before its route ran (see authorizer).
func (m *metrics) refusedRequest(reason string) {
	if m != nil {
		m.refusedRequests.WithLabelValues(reason).Inc()
	}
}

// refusedKey counts a request refused for its API key or its idempotency key.
func (m *metrics) refusedKey(key, reason string) {
	if m != nil {
		m.refusedKeys.WithLabelValues(key, reason).Inc()
	}
}

// codeOf is what a request ended with as its client sees it: the HTTP status on REST, the RPC
// code on RPC. An RPC refused before its method ran (connect could not read its message, say) has
// no recorded code; its code is then read from the answer, as a client would read it, and an
// answer that carries none (connect's 405 to a GET of a method that takes POST, its 415 to a
// content type it does not speak) is labelled with its HTTP status, which is all the client got:
// counted as "unknown", these client errors read as the server's own faults.
func codeOf(p protocol, info *requestInfo, status int, header http.Header) code {
	if status == 0 {
		status = http.StatusOK // what net/http sends for an answer that wrote nothing
	}
	if p == protocolREST {
		return code(status)
	}
	if info != nil && info.hasRPCCode {
		return rpcCode(info.rpcCode)
	}
	for _, name := range []string{"Grpc-Status", http.TrailerPrefix + "Grpc-Status"} {
		if value := header.Get(name); value != "" {
			c, err := strconv.ParseUint(value, 10, 32)
			if err != nil || c > uint64(connect.CodeUnauthenticated) {
				return rpcCode(connect.CodeUnknown)
			}
			return rpcCode(connect.Code(c))
		}
	}
	if c, ok := connectCodeOfStatus[status]; ok {
		return rpcCode(c)
	}
	return code(status)
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

// protocolOf names the protocol a request speaks: gRPC and gRPC-Web by their content types,
// Connect for any other request to an RPC, REST for the rest.
func protocolOf(r *http.Request, rpc bool) protocol {
	if !rpc {
		return protocolREST
	}
	var contentType string
	if values := r.Header["Content-Type"]; len(values) > 0 { // the server has made the key canonical
		contentType = values[0]
	}
	switch {
	case strings.HasPrefix(contentType, "application/grpc-web"):
		return protocolGRPCWeb
	case strings.HasPrefix(contentType, "application/grpc"):
		return protocolGRPC
	}
	return protocolConnect
}
