// Package observed wraps a store.Store so that every call is timed in Prometheus metrics, its
// errors counted by kind, and, with tracing on, made a span within the request's span.
package observed

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"usersd/store"
)

// operation is a method of store.Store, as the operation label and the span name it.
type operation int

const (
	getUser operation = iota
	listUsers
	createUser
	updateUser
	deleteUser
	softDeleteUser
	undeleteUser
	purgeUser
	getUserShowingDeleted
	purgeExpired
	listPosts
	createPost
	beginRequest
	abandonRequest
	deleteExpiredRequests
	userEvents
	deleteExpiredUserEvents
	position
	ping
	batchGetUsers
	createUsers
	softDeleteUsers
	deleteUsers
	operationCount
)

var operationNames = [operationCount]string{
	getUser: "GetUser", listUsers: "ListUsers", createUser: "CreateUser", updateUser: "UpdateUser",
	deleteUser: "DeleteUser", softDeleteUser: "SoftDeleteUser", undeleteUser: "UndeleteUser", purgeUser: "PurgeUser",
	getUserShowingDeleted: "GetUserShowingDeleted", purgeExpired: "PurgeExpired", listPosts: "ListPosts", createPost: "CreatePost", beginRequest: "BeginRequest",
	abandonRequest: "AbandonRequest", deleteExpiredRequests: "DeleteExpiredRequests",
	userEvents: "UserEvents", deleteExpiredUserEvents: "DeleteExpiredUserEvents", position: "Position",
	ping: "Ping", batchGetUsers: "BatchGetUsers", createUsers: "CreateUsers", softDeleteUsers: "SoftDeleteUsers",
	deleteUsers: "DeleteUsers",
}

// errorKind names an error of the store as the kind label does: the store's own errors by name,
// the ends of a request's context, and "other" for the rest, the faults.
func errorKind(err error) string {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return "not_found"
	case errors.Is(err, store.ErrVersionMismatch):
		return "version_mismatch"
	case errors.Is(err, store.ErrRequestInProgress):
		return "request_in_progress"
	case errors.Is(err, store.ErrRequestMismatch):
		return "request_mismatch"
	case errors.Is(err, store.ErrEventsSwept):
		return "events_swept"
	case errors.Is(err, store.ErrEventsAhead):
		return "events_ahead"
	case errors.Is(err, store.ErrUnavailable):
		return "unavailable"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline_exceeded"
	}
	return "other"
}

// isFault reports whether an error kind is a failure of the store rather than an answer about the
// data (a missing user, a stale version) or the request's own end.
func isFault(kind string) bool { return kind == "unavailable" || kind == "other" }

// Store is a store.Store whose calls are observed. It names next rather than embedding it and
// forwards every method by hand, so that a method added to store.Store fails to compile here
// until it is observed too.
type Store struct {
	next store.Store
	// durations holds each operation's series once it has been called, so that a call looks up no
	// labels, and an operation never called (most of them, on an idle server) shows no series: a
	// scrape of a fresh server is not hundreds of empty buckets.
	durations    [operationCount]atomic.Pointer[prometheus.Observer]
	durationsVec *prometheus.HistogramVec
	errors       *prometheus.CounterVec
	tracer       trace.Tracer // nil: no spans
	backend      attribute.KeyValue
}

var _ store.Store = (*Store)(nil)

// Options say where a Store reports. Either may be nil: no metrics, or no spans.
type Options struct {
	Metrics prometheus.Registerer
	Tracing trace.TracerProvider
	// System names the database in spans (db.system.name): "sqlite" or "postgresql".
	System string
}

// New returns next, observed as opts say.
func New(next store.Store, opts Options) (*Store, error) {
	s := &Store{next: next, backend: semconv.DBSystemNameKey.String(opts.System)}
	durations := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "usersd_store_operation_duration_seconds",
		Help:    "Time a call to the store takes, by operation (a method of the store: GetUser, ListUsers, ...), errors included.",
		Buckets: []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
	}, []string{"operation"})
	s.errors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "usersd_store_errors_total",
		Help: "Calls to the store that returned an error, by operation and kind: not_found, version_mismatch, request_in_progress, request_mismatch, events_swept, events_ahead, canceled and deadline_exceeded are answers or ends of the request; unavailable and other are faults.",
	}, []string{"operation", "kind"})
	if opts.Metrics != nil {
		for _, c := range []prometheus.Collector{durations, s.errors} {
			if err := opts.Metrics.Register(c); err != nil {
				return nil, err
			}
		}
	}
	s.durationsVec = durations
	if opts.Tracing != nil {
		s.tracer = opts.Tracing.Tracer("usersd/store")
	}
	return s, nil
}

// call is one observed call, from begin to end.
type call struct {
	op    operation
	start time.Time
	span  trace.Span // nil without tracing
}

// begin starts observing a call; the context it returns holds the call's span, if any.
func (s *Store) begin(ctx context.Context, op operation) (context.Context, call) {
	c := call{op: op, start: time.Now()}
	if s.tracer != nil && trace.SpanFromContext(ctx).IsRecording() {
		// Only within a request's span: a call outside any request would start a trace of its own.
		ctx, c.span = s.tracer.Start(ctx, "store."+operationNames[op], trace.WithSpanKind(trace.SpanKindClient),
			trace.WithAttributes(s.backend, semconv.DBOperationName(operationNames[op])))
	}
	return ctx, c
}

// durationOf returns the series of op's durations, made on its first call. Two first calls may both
// make it: the vector gives both the same series.
func (s *Store) durationOf(op operation) prometheus.Observer {
	if o := s.durations[op].Load(); o != nil {
		return *o
	}
	o := s.durationsVec.WithLabelValues(operationNames[op])
	s.durations[op].Store(&o)
	return o
}

// end records how a call ended.
func (s *Store) end(c call, err error) {
	s.durationOf(c.op).Observe(time.Since(c.start).Seconds())
	if err == nil {
		if c.span != nil {
			c.span.End()
		}
		return
	}
	kind := errorKind(err)
	s.errors.WithLabelValues(operationNames[c.op], kind).Inc()
	if c.span != nil {
		c.span.SetAttributes(semconv.ErrorTypeKey.String(kind))
		if isFault(kind) {
			c.span.SetStatus(codes.Error, kind)
		}
		c.span.End()
	}
}

func (s *Store) GetUser(ctx context.Context, id int32) (store.User, error) {
	ctx, c := s.begin(ctx, getUser)
	u, err := s.next.GetUser(ctx, id)
	s.end(c, err)
	return u, err
}

func (s *Store) ListUsers(ctx context.Context, q store.UserQuery) (store.Page[store.User], error) {
	ctx, c := s.begin(ctx, listUsers)
	page, err := s.next.ListUsers(ctx, q)
	s.end(c, err)
	return page, err
}

func (s *Store) CreateUser(ctx context.Context, u store.NewUser, done *store.Completion[store.User]) (store.User, error) {
	ctx, c := s.begin(ctx, createUser)
	created, err := s.next.CreateUser(ctx, u, done)
	s.end(c, err)
	return created, err
}

func (s *Store) BatchGetUsers(ctx context.Context, ids []int32) ([]store.User, error) {
	ctx, c := s.begin(ctx, batchGetUsers)
	users, err := s.next.BatchGetUsers(ctx, ids)
	s.end(c, err)
	return users, err
}

func (s *Store) CreateUsers(ctx context.Context, users []store.NewUser, done *store.Completion[[]store.User]) ([]store.User, error) {
	ctx, c := s.begin(ctx, createUsers)
	created, err := s.next.CreateUsers(ctx, users, done)
	s.end(c, err)
	return created, err
}

func (s *Store) SoftDeleteUsers(ctx context.Context, ids []int32, purgeAt time.Time) ([]store.User, error) {
	ctx, c := s.begin(ctx, softDeleteUsers)
	users, err := s.next.SoftDeleteUsers(ctx, ids, purgeAt)
	s.end(c, err)
	return users, err
}

func (s *Store) DeleteUsers(ctx context.Context, ids []int32) error {
	ctx, c := s.begin(ctx, deleteUsers)
	err := s.next.DeleteUsers(ctx, ids)
	s.end(c, err)
	return err
}

func (s *Store) UpdateUser(ctx context.Context, id int32, changes store.UserChanges, ifVersion store.IfVersion) (store.User, error) {
	ctx, c := s.begin(ctx, updateUser)
	u, err := s.next.UpdateUser(ctx, id, changes, ifVersion)
	s.end(c, err)
	return u, err
}

func (s *Store) DeleteUser(ctx context.Context, id int32, ifVersion store.IfVersion) error {
	ctx, c := s.begin(ctx, deleteUser)
	err := s.next.DeleteUser(ctx, id, ifVersion)
	s.end(c, err)
	return err
}

func (s *Store) SoftDeleteUser(ctx context.Context, id int32, ifVersion store.IfVersion, purgeAt time.Time) (store.User, error) {
	ctx, c := s.begin(ctx, softDeleteUser)
	u, err := s.next.SoftDeleteUser(ctx, id, ifVersion, purgeAt)
	s.end(c, err)
	return u, err
}

func (s *Store) UndeleteUser(ctx context.Context, id int32, ifVersion store.IfVersion) (store.User, error) {
	ctx, c := s.begin(ctx, undeleteUser)
	u, err := s.next.UndeleteUser(ctx, id, ifVersion)
	s.end(c, err)
	return u, err
}

func (s *Store) PurgeUser(ctx context.Context, id int32, ifVersion store.IfVersion) error {
	ctx, c := s.begin(ctx, purgeUser)
	err := s.next.PurgeUser(ctx, id, ifVersion)
	s.end(c, err)
	return err
}

func (s *Store) GetUserShowingDeleted(ctx context.Context, id int32) (store.User, error) {
	ctx, c := s.begin(ctx, getUserShowingDeleted)
	u, err := s.next.GetUserShowingDeleted(ctx, id)
	s.end(c, err)
	return u, err
}

func (s *Store) PurgeExpired(ctx context.Context, now time.Time, limit int) (int, error) {
	ctx, c := s.begin(ctx, purgeExpired)
	n, err := s.next.PurgeExpired(ctx, now, limit)
	s.end(c, err)
	return n, err
}

func (s *Store) ListPosts(ctx context.Context, userID int32, q store.PostQuery) (store.Page[store.Post], error) {
	ctx, c := s.begin(ctx, listPosts)
	page, err := s.next.ListPosts(ctx, userID, q)
	s.end(c, err)
	return page, err
}

func (s *Store) CreatePost(ctx context.Context, userID int32, p store.NewPost, done *store.Completion[store.Post]) (store.Post, error) {
	ctx, c := s.begin(ctx, createPost)
	created, err := s.next.CreatePost(ctx, userID, p, done)
	s.end(c, err)
	return created, err
}

func (s *Store) BeginRequest(ctx context.Context, key store.RequestKey, hash []byte) (store.Reservation, *store.Answer, error) {
	ctx, c := s.begin(ctx, beginRequest)
	reservation, answer, err := s.next.BeginRequest(ctx, key, hash)
	s.end(c, err)
	return reservation, answer, err
}

func (s *Store) AbandonRequest(ctx context.Context, r store.Reservation) error {
	ctx, c := s.begin(ctx, abandonRequest)
	err := s.next.AbandonRequest(ctx, r)
	s.end(c, err)
	return err
}

func (s *Store) DeleteExpiredRequests(ctx context.Context, limit int) (int, error) {
	ctx, c := s.begin(ctx, deleteExpiredRequests)
	n, err := s.next.DeleteExpiredRequests(ctx, limit)
	s.end(c, err)
	return n, err
}

func (s *Store) UserEvents(ctx context.Context, after int64, limit int) (store.UserEvents, error) {
	ctx, c := s.begin(ctx, userEvents)
	events, err := s.next.UserEvents(ctx, after, limit)
	s.end(c, err)
	return events, err
}

func (s *Store) DeleteExpiredUserEvents(ctx context.Context, limit int) (int, error) {
	ctx, c := s.begin(ctx, deleteExpiredUserEvents)
	n, err := s.next.DeleteExpiredUserEvents(ctx, limit)
	s.end(c, err)
	return n, err
}

// NotifyUserEvents is not observed: it is called once, and calls nothing.
func (s *Store) NotifyUserEvents(wake chan<- struct{}) (stop func()) {
	return s.next.NotifyUserEvents(wake)
}

func (s *Store) Position(ctx context.Context) (store.Position, error) {
	ctx, c := s.begin(ctx, position)
	p, err := s.next.Position(ctx)
	s.end(c, err)
	return p, err
}

func (s *Store) Ping(ctx context.Context) error {
	ctx, c := s.begin(ctx, ping)
	err := s.next.Ping(ctx)
	s.end(c, err)
	return err
}

// Close is not observed: it happens once, as the process stops.
func (s *Store) Close() error { return s.next.Close() }
