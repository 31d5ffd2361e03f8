package health

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"

	"connectrpc.com/connect"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"usersd/store"
	"usersd/store/sqlstore"
	"usersd/users"
)

// pingCounted is a real store whose pings are counted.
type pingCounted struct {
	store.Store
	pings atomic.Int64
}

func (p *pingCounted) Ping(ctx context.Context) error {
	p.pings.Add(1)
	return p.Store.Ping(ctx)
}

func openStore(t *testing.T) *pingCounted {
	t.Helper()
	st, err := sqlstore.Open(context.Background(), filepath.Join(t.TempDir(), "users.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &pingCounted{Store: st}
}

// TestServingFollowsTheStoreAndTheDrain: a process serves while its store answers and until it
// drains, and says why not in words for clients.
func TestServingFollowsTheStoreAndTheDrain(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	h := New(st)
	if why := h.NotReady(ctx); why != "" || !h.Serving(ctx) {
		t.Fatalf("a fresh process with its store: not ready (%q)", why)
	}
	st.Store.Close()
	if why := h.NotReady(ctx); why != "the database does not answer, or takes no writes" {
		t.Errorf("with its store closed: %q", why)
	}

	drained := New(openStore(t))
	drained.Drain()
	if why := drained.NotReady(ctx); why != "the server is stopping" || drained.Serving(ctx) {
		t.Errorf("draining: %q", why)
	}
	drained.Drain() // a second drain is harmless
}

// TestWatchesShareOnePing: every health watch of a poll period gets the answer of one ping, so that
// watches cannot make the store busy.
func TestWatchesShareOnePing(t *testing.T) {
	st := openStore(t)
	h := New(st)
	for range 1000 {
		if !h.watchedServing() {
			t.Fatal("a watch read NOT_SERVING from a store that answers")
		}
	}
	if n := st.pings.Load(); n != 1 {
		t.Errorf("1,000 watch polls pinged the store %d times; want 1", n)
	}
	h.Drain()
	if h.watchedServing() {
		t.Error("a watch read SERVING while the process drains")
	}
}

// TestStatusOfServices: the process ("") and the Users service are served; any other name is
// SERVICE_UNKNOWN with not_found, and its status is never asked of the store.
func TestStatusOfServices(t *testing.T) {
	asked := 0
	serving := func() bool { asked++; return true }
	for _, service := range servedServices {
		if status, err := statusOf(service, serving); err != nil || status != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("%q: %v, %v", service, status, err)
		}
	}
	status, err := statusOf("users.v1.Nope", serving)
	var ue *users.Error
	if status != healthpb.HealthCheckResponse_SERVICE_UNKNOWN || !errors.As(err, &ue) || ue.Code() != connect.CodeNotFound || ue.Reason() != reasonNoService {
		t.Errorf("an unknown service: %v, %v", status, err)
	}
	if asked != len(servedServices) {
		t.Errorf("the store was asked %d times for %d served services", asked, len(servedServices))
	}
	if _, err := statusOf("", func() bool { return false }); err != nil {
		t.Errorf("a process that does not serve is a status, not an error: %v", err)
	}
}

// TestWatchesEnd: the channels tell a drain and the end of the watches, once each, even to a
// watch that asks after they happened.
func TestWatchesEnd(t *testing.T) {
	h := New(openStore(t))
	drained, ended := h.changes()
	h.Drain()
	h.EndWatches()
	h.EndWatches()
	for name, ch := range map[string]<-chan struct{}{"drained": drained, "ended": ended} {
		select {
		case <-ch:
		default:
			t.Errorf("%s is not closed", name)
		}
	}
	if _, late := h.changes(); !isClosed(late) {
		t.Error("a watch that starts after the end is not told")
	}
	if errWatchesEnded.Code() != connect.CodeUnavailable {
		t.Errorf("the end of the watches is %v; want unavailable, for the client to go elsewhere", errWatchesEnded)
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
