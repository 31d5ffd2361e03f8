package observed_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"usersd/store"
	"usersd/store/observed"
	"usersd/store/sqlstore"
	"usersd/store/storetest"
)

func openSQLite(t *testing.T, opts ...sqlstore.Option) *sqlstore.Store {
	t.Helper()
	s, err := sqlstore.Open(context.Background(), filepath.Join(t.TempDir(), "users.db"), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestObservedStoreConformance: observing a store changes nothing it does.
func TestObservedStoreConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, now func() time.Time) store.Store {
		s, err := observed.New(openSQLite(t, sqlstore.WithClock(now)), observed.Options{Metrics: prometheus.NewRegistry(), System: "sqlite"})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// TestEveryCallIsTimedAndEveryErrorCountedByKind: each call adds one observation to its
// operation's histogram, and each error one count to its operation and kind.
func TestEveryCallIsTimedAndEveryErrorCountedByKind(t *testing.T) {
	ctx := context.Background()
	registry := prometheus.NewRegistry()
	s, err := observed.New(openSQLite(t), observed.Options{Metrics: registry, System: "sqlite"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// An operation shows a series once it has been called: a fresh store shows none.
	if n, err := testutil.GatherAndCount(registry, "usersd_store_operation_duration_seconds"); err != nil || n != 0 {
		t.Fatalf("a store never called shows %d duration series (%v), want none", n, err)
	}
	u, err := s.CreateUser(ctx, store.NewUser{Name: "ada"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetUser(ctx, u.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetUser(ctx, u.ID+1); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetUser of no user: %v", err)
	}
	if _, err := s.UpdateUser(ctx, u.ID, store.UserChanges{}, store.IfVersion{99}); !errors.Is(err, store.ErrVersionMismatch) {
		t.Fatalf("UpdateUser at a stale version: %v", err)
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.ListUsers(canceled, store.UserQuery{Limit: 10}); !errors.Is(err, context.Canceled) {
		t.Fatalf("ListUsers with its context gone: %v", err)
	}

	const want = `
# HELP usersd_store_errors_total Calls to the store that returned an error, by operation and kind: not_found, version_mismatch, request_in_progress, request_mismatch, events_swept, events_ahead, canceled and deadline_exceeded are answers or ends of the request; unavailable and other are faults.
# TYPE usersd_store_errors_total counter
usersd_store_errors_total{kind="canceled",operation="ListUsers"} 1
usersd_store_errors_total{kind="not_found",operation="GetUser"} 1
usersd_store_errors_total{kind="version_mismatch",operation="UpdateUser"} 1
`
	if err := testutil.GatherAndCompare(registry, strings.NewReader(want), "usersd_store_errors_total"); err != nil {
		t.Error(err)
	}
	for operation, calls := range map[string]uint64{"CreateUser": 1, "GetUser": 2, "UpdateUser": 1, "ListUsers": 1, "DeleteUser": 0} {
		if got := histogramCount(t, registry, "usersd_store_operation_duration_seconds", operation); got != calls {
			t.Errorf("%s timed %d times, want %d", operation, got, calls)
		}
	}
	if n, err := testutil.GatherAndCount(registry, "usersd_store_operation_duration_seconds"); err != nil || n != 4 {
		t.Errorf("%d duration series after calls of 4 operations (%v), want 4", n, err)
	}
}

// TestStoreCallsAreSpansOnlyWithinARequestsSpan: within a recording span each call is a child span
// named after its operation; outside any (the sweeper, say) a call starts no trace.
func TestStoreCallsAreSpansOnlyWithinARequestsSpan(t *testing.T) {
	recorder := tracetest.NewSpanRecorder()
	provider := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorder))
	s, err := observed.New(openSQLite(t), observed.Options{Tracing: provider, System: "sqlite"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	if _, err := s.DeleteExpiredRequests(context.Background(), 10); err != nil {
		t.Fatal(err)
	}
	ctx, request := provider.Tracer("test").Start(context.Background(), "request")
	if _, err := s.GetUser(ctx, 12345); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetUser of no user: %v", err)
	}
	request.End()

	ended := recorder.Ended()
	if len(ended) != 2 {
		var names []string
		for _, span := range ended {
			names = append(names, span.Name())
		}
		t.Fatalf("spans %v, want the store call and the request", names)
	}
	call := ended[0]
	if call.Name() != "store.GetUser" || call.Parent().SpanID() != request.SpanContext().SpanID() {
		t.Errorf("span %q with parent %s, want store.GetUser within the request's span %s", call.Name(), call.Parent().SpanID(), request.SpanContext().SpanID())
	}
	attributes := map[string]string{}
	for _, attr := range call.Attributes() {
		attributes[string(attr.Key)] = attr.Value.String()
	}
	for key, want := range map[string]string{"db.system.name": "sqlite", "db.operation.name": "GetUser", "error.type": "not_found"} {
		if attributes[key] != want {
			t.Errorf("%s = %q, want %q", key, attributes[key], want)
		}
	}
	if call.Status().Code != 0 { // codes.Unset: a missing user is an answer, not a fault
		t.Errorf("a missing user made the span's status %v", call.Status())
	}
}

// histogramCount returns how many observations the histogram family holds for operation.
func histogramCount(t *testing.T, registry *prometheus.Registry, family, operation string) uint64 {
	t.Helper()
	families, err := registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != family {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "operation" && l.GetValue() == operation {
					return m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return 0
}
