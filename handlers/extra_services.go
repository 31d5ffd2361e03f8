// Extra connect services: a service mounted beside the service's own, through the same route table,
// connect options, interceptors and middleware, so that what it answers is what any client of
// usersd would get. The binary mounts none; the Connect conformance suite mounts its service this
// way (internal/conformancetest) to judge usersd's protocol handling rather than connect-go's.
package handlers

import (
	"net/http"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// ExtraService is one service of Config.ExtraServices.
type ExtraService struct {
	// Descriptor declares the service's methods: the route table reads from it which methods
	// stream and which change nothing, as it does for the Users service.
	Descriptor protoreflect.ServiceDescriptor
	// Public, when set, says why every method of the service may be called without a key; without
	// it the methods are protected as the Users service's are.
	Public string
	// Mount builds the service's handler with usersd's connect options and returns the path it
	// serves, as a generated New...Handler does.
	Mount func(options ...connect.HandlerOption) (string, http.Handler)
}

// addExtraService mounts s with the RPC options every service of usersd gets.
func addExtraService(routes *routeTable, s ExtraService, options []connect.HandlerOption) {
	path, h := s.Mount(options...)
	methods := rpcMethods(s.Descriptor)
	if s.Public != "" {
		for i := range methods {
			methods[i].reads, methods[i].scope = s.Public, 0
		}
	}
	routes.rpc(path, h, methods)
}
