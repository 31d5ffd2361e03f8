// gRPC health checking (grpc.health.v1.Health) on every RPC protocol: Check, Watch and List, all
// three that the service's descriptor declares, so that reflection advertises only what is served.
// grpchealth answers Watch unimplemented and has no List, so the service is served here, with the
// messages of grpc-go's health package.
package health

import (
	"context"
	"net/http"
	"slices"
	"time"

	"usersd/users"

	"connectrpc.com/connect"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// ServiceName is the service's full name, as health and reflection clients ask for it.
const ServiceName = "grpc.health.v1.Health"

// watchPoll is how often a health watch asks the store again: draining and the end of the
// watches are told at once, but a store that stops (or starts again) answering is only learned by
// asking it.
const watchPoll = 5 * time.Second

// Handler returns the path and handler of gRPC health checking on h.
func (h *Checker) Handler(options ...connect.HandlerOption) (string, http.Handler) {
	const path = "/" + ServiceName + "/"
	methods := healthpb.File_grpc_health_v1_health_proto.Services().ByName("Health").Methods()
	withSchema := func(name string) []connect.HandlerOption {
		return append(slices.Clip(options), connect.WithSchema(methods.ByName(protoreflect.Name(name))))
	}
	mux := http.NewServeMux()
	mux.Handle(path+"Check", connect.NewUnaryHandler(path+"Check", h.checkRPC, withSchema("Check")...))
	mux.Handle(path+"Watch", connect.NewServerStreamHandler(path+"Watch", h.watchRPC, withSchema("Watch")...))
	mux.Handle(path+"List", connect.NewUnaryHandler(path+"List", h.listRPC, withSchema("List")...))
	return path, mux
}

// status is the serving status of service ("" for the process), or an error for a service that is
// not served.
func (h *Checker) status(ctx context.Context, service string) (healthpb.HealthCheckResponse_ServingStatus, error) {
	return statusOf(service, func() bool { return h.Serving(ctx) })
}

// reasonNoService is the reason of a check of a service that is not served.
const reasonNoService users.Reason = "NO_SERVICE"

// statusOf is the serving status of service, asking serving only for a service that is served.
func statusOf(service string, serving func() bool) (healthpb.HealthCheckResponse_ServingStatus, error) {
	if !slices.Contains(servedServices, service) {
		return healthpb.HealthCheckResponse_SERVICE_UNKNOWN, users.NewError(connect.CodeNotFound, reasonNoService, "unknown service %q", service)
	}
	if !serving() {
		return healthpb.HealthCheckResponse_NOT_SERVING, nil
	}
	return healthpb.HealthCheckResponse_SERVING, nil
}

func (h *Checker) checkRPC(ctx context.Context, req *connect.Request[healthpb.HealthCheckRequest]) (*connect.Response[healthpb.HealthCheckResponse], error) {
	status, err := h.status(ctx, req.Msg.GetService())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&healthpb.HealthCheckResponse{Status: status}), nil
}

// listRPC answers the status of every service served, the process ("") among them.
func (h *Checker) listRPC(ctx context.Context, _ *connect.Request[healthpb.HealthListRequest]) (*connect.Response[healthpb.HealthListResponse], error) {
	status, _ := h.status(ctx, "") // every service served shares the process's status
	statuses := make(map[string]*healthpb.HealthCheckResponse, len(servedServices))
	for _, service := range servedServices {
		statuses[service] = &healthpb.HealthCheckResponse{Status: status}
	}
	return connect.NewResponse(&healthpb.HealthListResponse{Statuses: statuses}), nil
}

// watchRPC sends the service's status at once, then each time it changes, until the client goes or
// the server stops (unavailable, so that the client watches another replica). A service that is not
// served is SERVICE_UNKNOWN, as the protocol says, not an error: it may be served later.
func (h *Checker) watchRPC(ctx context.Context, req *connect.Request[healthpb.HealthCheckRequest], stream *connect.ServerStream[healthpb.HealthCheckResponse]) error {
	drained, ended := h.changes()
	poll := time.NewTicker(watchPoll)
	defer poll.Stop()
	var last healthpb.HealthCheckResponse_ServingStatus = -1
	for {
		status, _ := statusOf(req.Msg.GetService(), h.watchedServing)
		if status != last {
			if err := stream.Send(&healthpb.HealthCheckResponse{Status: status}); err != nil {
				return err
			}
			last = status
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ended:
			return errWatchesEnded
		case <-drained:
			drained = nil // told once; a closed channel would be ready forever
		case <-poll.C:
		}
	}
}
