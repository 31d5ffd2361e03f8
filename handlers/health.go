// gRPC health checking: SERVING while the store answers, NOT_SERVING while it does not.
package handlers

import (
	"context"
	"fmt"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"

	"usersd/gen/users/v1/usersv1connect"
	"usersd/store"
)

// storeHealth reports the process ("") and the Users service as healthy while the store answers.
type storeHealth struct {
	store store.Store
}

var _ grpchealth.Checker = storeHealth{}

func (h storeHealth) Check(ctx context.Context, req *grpchealth.CheckRequest) (*grpchealth.CheckResponse, error) {
	if req.Service != "" && req.Service != usersv1connect.UsersName {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("unknown service %q", req.Service))
	}
	ctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	if err := h.store.Ping(ctx); err != nil {
		return &grpchealth.CheckResponse{Status: grpchealth.StatusNotServing}, nil
	}
	return &grpchealth.CheckResponse{Status: grpchealth.StatusServing}, nil
}
