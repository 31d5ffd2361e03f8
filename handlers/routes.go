// Every route of the service, in one place: the RPC services, the REST resource, the service's own
// routes and the static files.
package handlers

import (
	"net/http"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"

	usersv1 "usersd/gen/users/v1"
	"usersd/gen/users/v1/usersv1connect"
	"usersd/web"
)

func addRoutes(mux *http.ServeMux, d deps) error {
	users, errs, keys := d.users, d.errs, d.Keys
	protect := func(h http.Handler) http.Handler { return requireAPIKey(keys, errs, h) }
	// mountRPC mounts an RPC service and records its path with the error writer, so that the paths
	// whose errors are written in the RPC protocol are exactly the ones mounted here.
	mountRPC := func(path string, h http.Handler) {
		mux.Handle(path, h)
		errs.rpcPrefixes = append(errs.rpcPrefixes, path)
	}
	rpcOptions := []connect.HandlerOption{
		connect.WithCodec(jsonCodecs[0]), connect.WithCodec(jsonCodecs[1]),
		connect.WithReadMaxBytes(int(d.MaxBodyBytes)),
		connect.WithInterceptors(sanitizeErrors(d.Logger)),
	}

	// RPC: gRPC, gRPC-Web and Connect on one handler. Every method that is not marked
	// NO_SIDE_EFFECTS in the proto changes data and needs a key, so a new RPC is protected by default.
	usersPath, usersRPC := usersv1connect.NewUsersHandler(users, rpcOptions...)
	mountRPC(usersPath, usersRPC)
	for _, procedure := range writeProcedures(usersv1.File_users_v1_users_proto.Services().ByName("Users")) {
		mux.Handle(procedure, protect(usersRPC))
	}
	health := storeHealth{d.Store}
	mountRPC(grpchealth.NewHandler(health, rpcOptions...))
	reflector := grpcreflect.NewStaticReflector(usersv1connect.UsersName, grpchealth.HealthV1ServiceName)
	mountRPC(grpcreflect.NewHandlerV1(reflector, rpcOptions...))
	mountRPC(grpcreflect.NewHandlerV1Alpha(reflector, rpcOptions...))

	// REST: reads are public, writes need a key.
	mux.Handle("GET /users", listUsersREST(users, errs))
	mux.Handle("POST /users", protect(createUserREST(users, errs)))
	mux.Handle("GET /users/{id}", getUserREST(users, errs))
	mux.Handle("PUT /users/{id}", protect(replaceUserREST(users, errs)))
	mux.Handle("PATCH /users/{id}", protect(updateUserREST(users, errs)))
	mux.Handle("DELETE /users/{id}", protect(deleteUserREST(users, errs)))
	mux.Handle("GET /users/{id}/posts", listPostsREST(users, errs))
	mux.Handle("POST /users/{id}/posts", protect(createPostREST(users, errs)))

	// The service's own routes.
	mux.Handle("GET /health", healthREST(health))
	mux.Handle("GET /info", infoREST(errs))
	mux.Handle("POST /echo", echoREST(errs))
	mux.Handle("GET /private", protect(privateREST(errs)))
	mux.Handle("GET /boom", boomREST())

	// Static files at the root, each file its own route.
	return addStaticRoutes(mux, web.Public)
}

// writeProcedures lists the procedure paths of the service's methods that may change data.
func writeProcedures(service protoreflect.ServiceDescriptor) []string {
	var procedures []string
	methods := service.Methods()
	for i := range methods.Len() {
		m := methods.Get(i)
		options, _ := m.Options().(*descriptorpb.MethodOptions)
		if options.GetIdempotencyLevel() != descriptorpb.MethodOptions_NO_SIDE_EFFECTS {
			procedures = append(procedures, "/"+string(service.FullName())+"/"+string(m.Name()))
		}
	}
	return procedures
}
