// Health: one decision, whether the store answers, asked by /health and by gRPC health checking.
package handlers

import (
	"context"
	"fmt"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"

	"usersd/gen/users/v1/usersv1connect"
	"usersd/store"
)

// healthTimeout bounds the store ping of a health check, so a hung database reads as unhealthy
// instead of hanging the load balancer's probe.
const healthTimeout = 2 * time.Second

// storeHealth reports the process ("") and the Users service as healthy while the store answers.
type storeHealth struct {
	store store.Store
}

// serving reports whether the store answers within healthTimeout.
func (h storeHealth) serving(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	return h.store.Ping(ctx) == nil
}

var _ grpchealth.Checker = storeHealth{}

func (h storeHealth) Check(ctx context.Context, req *grpchealth.CheckRequest) (*grpchealth.CheckResponse, error) {
	if req.Service != "" && req.Service != usersv1connect.UsersName {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("unknown service %q", req.Service))
	}
	if !h.serving(ctx) {
		return &grpchealth.CheckResponse{Status: grpchealth.StatusNotServing}, nil
	}
	return &grpchealth.CheckResponse{Status: grpchealth.StatusServing}, nil
}
