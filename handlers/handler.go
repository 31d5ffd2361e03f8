// Package handlers is the HTTP face of usersd: one http.Handler that serves gRPC, gRPC-Web, Connect,
// REST and static files on one port. Every route of the users resource adapts HTTP to the one
// implementation of the rules in package users; what is HTTP's own lives here: the route table and
// who may call each route, the REST adapters, codecs, request ids, deadlines and streams, the error
// writer that turns the service's codes into statuses, and the observation of every request.
package handlers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"usersd/auth"
	"usersd/gen/users/v1/usersv1connect"
	"usersd/handlers/apierror"
	"usersd/handlers/health"
	"usersd/handlers/watchslots"
	"usersd/store"
	"usersd/users"
)

// DefaultMaxBodyBytes caps request bodies when Config.MaxBodyBytes is 0.
const DefaultMaxBodyBytes = 1 << 20

// Config is what the service's handler depends on.
type Config struct {
	Store store.Store
	Keys  *auth.APIKeys // valid API keys, with their scopes; at least one
	// PrivateReads makes every read of users need a credential that holds users.read; by default
	// reads are public (-public-reads).
	PrivateReads bool
	// RateLimit is the requests a second each caller may make to the routes of users; 0 means no
	// limit. RateBurst is the most it may make at once; 0 means twice RateLimit (at least 1).
	RateLimit float64
	RateBurst int
	// Bearer, when set, accepts bearer tokens from an OpenID Connect issuer besides API keys.
	Bearer *auth.BearerConfig
	// Background ends the service's own background work (fetching the token issuer's keys); nil
	// means it lasts as long as the process.
	Background context.Context
	Logger     *slog.Logger
	// AccessLog takes the JSON line logged for every request; nil means no access log. The lines of
	// probes (/health, /livez, /readyz, gRPC health) are DEBUG, written only with LogProbes.
	AccessLog io.Writer
	LogProbes bool
	// MaxBodyBytes caps every request body, REST and RPC alike; 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// RequestTimeout is the deadline of each request's work, store queries included; 0 means
	// DefaultRequestTimeout. An RPC client's own shorter deadline (grpc-timeout) still wins.
	RequestTimeout time.Duration
	// CORSOrigins may call the service from pages of theirs; none means same origin only.
	CORSOrigins []string
	// TrustRequestID takes a request's X-Request-Id (a sane one) as its id, for a service behind a
	// proxy that sets the header on every request, replacing the client's. Otherwise the service
	// makes every id itself, so that no client can choose the id that its log lines go under, and
	// logs a client's X-Request-Id beside it as client_request_id.
	TrustRequestID bool
	// Metrics takes the service's collectors (see metrics.go); nil means no metrics.
	Metrics prometheus.Registerer
	// Tracing, when set, makes every request a span of the caller's trace (W3C traceparent), or of
	// a new one; nil means no spans.
	Tracing trace.TracerProvider
	// MaxWatchers limits the watches of users open at once; 0 means users.DefaultMaxWatchers.
	MaxWatchers int
	// WatchHeartbeat is the longest a watch stays silent; 0 means users.DefaultWatchHeartbeat.
	WatchHeartbeat time.Duration
	// DeletedRetention keeps a deleted user, restorable, this long (users.Options.DeletedRetention);
	// 0 removes it at once. cmd/usersd's flag defaults to users.DefaultDeletedRetention.
	DeletedRetention time.Duration
	// WatchersPerAddress and WatchersPerConnection cap the watches open at once from one client
	// address and on one connection, so that one client cannot take all MaxWatchers; 0 means no
	// cap (cmd/usersd's flags default to DefaultWatchersPerAddress and DefaultWatchersPerConnection).
	WatchersPerAddress, WatchersPerConnection int
	// AnswerMemory bounds the bytes of answers held for clients that have not yet taken them; a
	// read whose answer does not fit is refused with 503 / unavailable. 0 means DefaultAnswerMemory.
	AnswerMemory int64
	// Webhooks, when set, serves the Webhooks RPC service (webhook subscriptions), every method of it
	// behind webhooks.manage.
	Webhooks usersv1connect.WebhooksHandler
	// ExtraServices are connect services mounted beside the service's own (see ExtraService); the
	// binary sets none.
	ExtraServices []ExtraService
}

// instrumentationName names the service's spans' instrumentation scope.
const instrumentationName = "usersd/handlers"

// DefaultRequestTimeout is the deadline of a request when Config.RequestTimeout is 0.
const DefaultRequestTimeout = 10 * time.Second

// Service is the handler of the whole service.
type Service struct {
	http.Handler
	health *health.Checker
	users  *users.Service
	routes []route // every route as registered, with who may call it: what the route tests drive
	// streamPaths are the paths of the stream routes (watches), whose answers last as long as
	// their clients watch.
	streamPaths map[string]bool
}

// Lasting reports whether r asks for a stream route, whose answer lasts as long as its client
// watches.
func (s *Service) Lasting(r *http.Request) bool { return s.streamPaths[r.URL.Path] }

// Drain makes health checks (gRPC health and /health) answer NOT_SERVING from now on, while every
// route still works, so that load balancers stop sending new requests before the server stops.
func (s *Service) Drain() { s.health.Drain() }

// EndWatches ends every watch of users and of gRPC health with UNAVAILABLE (an "error" event on
// REST), so that clients resume on another replica, and refuses new ones: a watch never ends by
// itself, so a server that waits for its requests to finish must end them first.
// http.Server.RegisterOnShutdown takes it.
func (s *Service) EndWatches() {
	s.users.EndWatches()
	s.health.EndWatches()
}

// deps is what the routes are built from: the configuration and the pieces New makes from it.
type deps struct {
	Config
	users  *users.Service
	errs   *errorWriter
	health *health.Checker
}

// New returns the handler of the whole service.
func New(cfg Config) (*Service, error) {
	if cfg.Store == nil || cfg.Logger == nil {
		return nil, errors.New("handlers.New needs a store and a logger")
	}
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.AnswerMemory == 0 {
		cfg.AnswerMemory = DefaultAnswerMemory
	}
	if cfg.WatchHeartbeat == 0 {
		cfg.WatchHeartbeat = users.DefaultWatchHeartbeat
	}
	// Every line logged in a request's context, here or in the service, carries its id.
	cfg.Logger = slog.New(logWithRequestIDs(cfg.Logger.Handler()))
	metrics, err := newMetrics(cfg.Metrics)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	service, err := users.New(users.Options{
		Store: cfg.Store, Logger: cfg.Logger, Metrics: metrics, MaxWatchers: cfg.MaxWatchers, WatchHeartbeat: cfg.WatchHeartbeat,
		DeletedRetention: cfg.DeletedRetention,
	})
	if err != nil {
		return nil, err
	}
	budget, err := newAnswerBudget(cfg.AnswerMemory, cfg.Metrics)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	checker := health.New(cfg.Store)
	gate, err := auth.NewGate(auth.GateConfig{Keys: cfg.Keys, PrivateReads: cfg.PrivateReads,
		RateLimit: cfg.RateLimit, RateBurst: cfg.RateBurst, Bearer: cfg.Bearer, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	routes := newRouteTable(gate, cfg.Logger, metrics, cfg.WatchHeartbeat)
	routes.watchSlots = watchslots.New(cfg.WatchersPerAddress, cfg.WatchersPerConnection)
	if err := addRoutes(routes, deps{Config: cfg, users: service, errs: routes.errs, health: checker}); err != nil {
		return nil, fmt.Errorf("routes: %w", err)
	}
	go gate.KeepKeys(cmp.Or(cfg.Background, context.Background())) // only now that New cannot fail
	obs := observer{metrics: metrics, accessLog: cfg.AccessLog, logProbes: cfg.LogProbes, routes: routes}
	if cfg.Tracing != nil {
		obs.tracer = cfg.Tracing.Tracer(instrumentationName)
	}
	streamPaths := map[string]bool{}
	for _, r := range routes.routes {
		if r.stream {
			streamPaths[patternPath(r.pattern)] = true
		}
	}
	return &Service{Handler: withMiddleware(cfg, obs, routes, budget, routes.serving), health: checker, users: service,
		routes: routes.routes, streamPaths: streamPaths}, nil
}

// withMiddleware wraps the routes in what every request passes through, outermost last. The order
// matters: the request context (id, deadline) comes first so that everything below can log with
// it, the observer (metrics, span, access log) sees every answer, and the final error handler is
// below CORS and the security headers so that an error it writes carries them. (A stream route
// sheds the deadline: see routeTable.add.)
func withMiddleware(cfg Config, obs observer, routes *routeTable, budget *answerBudget, serving http.Handler) http.Handler {
	errs := routes.errs
	h := withCleanPaths(errs, apierror.WithProtocolDetails(routes.isRPC, answeredByConnect, serving))
	h = withConnectGETChecks(routes, h)
	h = withBodyLimit(routes, cfg.MaxBodyBytes, h)
	h = withChunkedRequestsClosing(h)
	h = withRecover(cfg.Logger, errs, h)
	h = withSecurityHeaders(routes, h)
	h = withCORS(cfg.CORSOrigins, h)
	h = withObservation(obs, h)
	return withRequestContext(cfg.RequestTimeout, cfg.TrustRequestID, budget, h)
}

// withCleanPaths answers 404 for a path with dot segments or doubled slashes, or with
// percent-encoding where none is needed: every resource has one path (a cache or a proxy rule
// keyed on it sees every request for it), and the mux would otherwise redirect dot segments to the
// clean form, with an HTML body, before any route or key check.
func withCleanPaths(errs *errorWriter, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isAliasEncoding(r.URL) || !isCleanPath(r.URL.EscapedPath()) {
			errs.write(w, r, users.NewError(connect.CodeNotFound, apierror.ReasonNoRoute, "no route for %s: the path is not in its clean form", r.URL.EscapedPath()))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// answerMiss answers the requests that no route serves with the service's JSON errors instead of
// the mux's plain text: 404 for a path that no route serves, 405 (with Allow) for a known path asked
// with another method, and unimplemented for a miss under an RPC path.
func answerMiss(known *http.ServeMux, errs *errorWriter) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		missHandler, pattern := known.Handler(r)
		if pattern != "" { // cannot happen while serving and known hold the same routes
			known.ServeHTTP(w, r)
			return
		}
		// The mux's own handler knows whether it is 404 or 405 and what Allow holds. Let it answer
		// into a recorder to learn both.
		miss := &missRecorder{header: http.Header{}}
		missHandler.ServeHTTP(miss, r)
		if miss.status == http.StatusMethodNotAllowed {
			allow := miss.header.Get("Allow")
			w.Header().Set("Allow", allow)
			errs.write(w, r, apierror.New(http.StatusMethodNotAllowed, connect.CodeUnimplemented, apierror.ReasonMethodNotAllowed,
				"method %s is not allowed on %s; allowed: %s", r.Method, r.URL.Path, allow))
			return
		}
		if errs.routes.isRPC(r) {
			if isConnectUnary(r) {
				// The Connect protocol answers a procedure it does not serve with 404, as any
				// server without the path would; connect's error writer sends unimplemented as 501.
				w = &statusAs{ResponseWriter: w, from: http.StatusNotImplemented, to: http.StatusNotFound}
			}
			errs.write(w, r, users.NewError(connect.CodeUnimplemented, apierror.ReasonNoProcedure, "no procedure %s", r.URL.Path))
			return
		}
		errs.write(w, r, users.NewError(connect.CodeNotFound, apierror.ReasonNoRoute, "no route for %s", r.URL.Path))
	})
}

// isAliasEncoding reports whether u's path percent-encodes a character that needs no encoding
// (a letter, a digit, "-", ".", "_" or "~"): RFC 3986 section 6.2.2.2 makes such a path the same
// as the one with the character itself, so it would be a second spelling of one path (/users/%32
// for /users/2). Other encodings stay meaningful: %2F is a slash inside a segment, which the mux
// keeps apart from a slash between segments.
func isAliasEncoding(u *url.URL) bool {
	raw := u.RawPath // set only when the path was sent encoded otherwise than Go would encode it
	for i := 0; i+2 < len(raw); i++ {
		if raw[i] != '%' {
			continue
		}
		b, err := strconv.ParseUint(raw[i+1:i+3], 16, 8)
		if err == nil && isUnreserved(byte(b)) {
			return true
		}
	}
	return false
}

func isUnreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}

// isCleanPath reports whether p is already in the form path.Clean gives, a trailing slash aside.
func isCleanPath(p string) bool {
	clean := path.Clean(p)
	if strings.HasSuffix(p, "/") && clean != "/" {
		clean += "/"
	}
	return clean == p
}

// missRecorder keeps the status and headers of the mux's own 404 or 405 answer and drops its body.
type missRecorder struct {
	header http.Header
	status int
}

func (m *missRecorder) Header() http.Header         { return m.header }
func (m *missRecorder) Write(b []byte) (int, error) { return len(b), nil }
func (m *missRecorder) WriteHeader(status int)      { m.status = status }

// isConnectUnary reports whether an RPC request speaks the Connect protocol's unary form: neither
// gRPC nor gRPC-Web (application/grpc...) nor a Connect stream (application/connect+...).
func isConnectUnary(r *http.Request) bool {
	contentType := headerValue(r.Header, "Content-Type")
	return !strings.HasPrefix(contentType, "application/grpc") && !strings.HasPrefix(contentType, "application/connect+")
}

// statusAs writes the status to instead of from, and every other status as it is.
type statusAs struct {
	http.ResponseWriter
	from, to int
}

func (s *statusAs) WriteHeader(status int) {
	if status == s.from {
		status = s.to
	}
	s.ResponseWriter.WriteHeader(status)
}

func (s *statusAs) Unwrap() http.ResponseWriter { return s.ResponseWriter }
