// Health: one decision, whether the store answers, asked by /health and by gRPC health checking.
package handlers

import (
	"context"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"

	"usersd/gen/users/v1/usersv1connect"
	"usersd/store"
	"usersd/users"
)

// healthTimeout bounds the store ping of a health check, so a hung database reads as unhealthy
// instead of hanging the load balancer's probe.
const healthTimeout = 2 * time.Second

// storeHealth reports the process ("") and the Users service as healthy while the store answers and
// the process is not draining for shutdown.
type storeHealth struct {
	store    store.Store
	draining atomic.Bool
}

// serving reports whether the process takes new requests and the store answers within healthTimeout.
func (h *storeHealth) serving(ctx context.Context) bool { return h.notReady(ctx) == "" }

// notReady says why the process should not be sent new requests, or "" when it should: it is
// draining, or the store does not answer (or takes no writes) within healthTimeout. The words are
// for clients: the store's own error is not among them.
func (h *storeHealth) notReady(ctx context.Context) string {
	if h.draining.Load() {
		return "the server is stopping"
	}
	ctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	if h.store.Ping(ctx) != nil {
		return "the database does not answer, or takes no writes"
	}
	return ""
}

var _ grpchealth.Checker = (*storeHealth)(nil)

func (h *storeHealth) Check(ctx context.Context, req *grpchealth.CheckRequest) (*grpchealth.CheckResponse, error) {
	if req.Service != "" && req.Service != usersv1connect.UsersName {
		return nil, users.NewError(connect.CodeNotFound, reasonNoService, "unknown service %q", req.Service)
	}
	if !h.serving(ctx) {
		return &grpchealth.CheckResponse{Status: grpchealth.StatusNotServing}, nil
	}
	return &grpchealth.CheckResponse{Status: grpchealth.StatusServing}, nil
}
