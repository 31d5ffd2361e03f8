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

// compressMinBytes is the smallest RPC answer that is compressed when the client accepts it.
const compressMinBytes = 4 << 10

// router is where routes are added: a routeTable, or a plain mux.
type router interface {
	Handle(pattern string, handler http.Handler)
}

func addRoutes(mux router, d deps) error {
	users, errs, keys := d.users, d.errs, d.Keys
	protect := func(h http.Handler) http.Handler { return requireAPIKey(keys, errs, h) }
	// mountRPC mounts each method of an RPC service at its own path, and records the service's path
	// with the error writer, so that the paths whose errors are written in the RPC protocol are
	// exactly the ones mounted here. A method that is not mounted is then a miss under an RPC path,
	// answered unimplemented in the caller's protocol (connect's handler would answer plain text).
	mountRPC := func(path string, methods map[string]http.Handler) {
		for method, h := range methods {
			mux.Handle(path+method, h)
		}
		errs.rpcPrefixes = append(errs.rpcPrefixes, path)
	}
	rpcOptions := []connect.HandlerOption{
		connect.WithCodec(jsonCodecs[0]), connect.WithCodec(jsonCodecs[1]), connect.WithCodec(protoCodec{}),
		connect.WithReadMaxBytes(int(d.MaxBodyBytes)),
		withBoundedGzip(d.MaxBodyBytes),
		// gRPC clients offer gzip on every call; compressing a user of a few hundred bytes costs more
		// CPU than the bytes it saves, so only answers of a page or more are compressed.
		connect.WithCompressMinBytes(compressMinBytes),
		connect.WithInterceptors(sanitizeErrors(d.Logger)),
	}

	// RPC: gRPC, gRPC-Web and Connect on one handler. Every method that is not marked
	// NO_SIDE_EFFECTS in the proto changes data and needs a key, so a new RPC is protected by default.
	usersPath, usersRPC := usersv1connect.NewUsersHandler(users, rpcOptions...)
	usersMethods := map[string]http.Handler{}
	for _, m := range rpcMethods(usersv1.File_users_v1_users_proto.Services().ByName("Users")) {
		usersMethods[m.name] = usersRPC
		if m.writes {
			usersMethods[m.name] = protect(usersRPC)
		}
	}
	mountRPC(usersPath, usersMethods)
	healthPath, healthRPC := grpchealth.NewHandler(d.health, rpcOptions...)
	mountRPC(healthPath, map[string]http.Handler{"Check": healthRPC, "Watch": healthRPC})
	reflector := grpcreflect.NewStaticReflector(usersv1connect.UsersName, grpchealth.HealthV1ServiceName)
	for _, newReflection := range []func(*grpcreflect.Reflector, ...connect.HandlerOption) (string, http.Handler){
		grpcreflect.NewHandlerV1, grpcreflect.NewHandlerV1Alpha,
	} {
		reflectionPath, reflection := newReflection(reflector, rpcOptions...)
		mountRPC(reflectionPath, map[string]http.Handler{"ServerReflectionInfo": reflection})
	}

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
	mux.Handle("GET /health", healthREST(d.health))
	mux.Handle("GET /info", infoREST(errs))
	mux.Handle("POST /echo", echoREST(errs))
	mux.Handle("GET /private", protect(privateREST(errs)))
	mux.Handle("GET /boom", boomREST())

	// Static files at the root, each file its own route.
	return addStaticRoutes(mux, web.Public)
}

// rpcMethod is a method of an RPC service, and whether it may change data.
type rpcMethod struct {
	name   string
	writes bool
}

// rpcMethods lists the service's methods. Every method that is not marked NO_SIDE_EFFECTS may change
// data, so a new method needs a key unless the proto says it only reads.
func rpcMethods(service protoreflect.ServiceDescriptor) []rpcMethod {
	var out []rpcMethod
	methods := service.Methods()
	for i := range methods.Len() {
		m := methods.Get(i)
		options, _ := m.Options().(*descriptorpb.MethodOptions)
		out = append(out, rpcMethod{name: string(m.Name()), writes: options.GetIdempotencyLevel() != descriptorpb.MethodOptions_NO_SIDE_EFFECTS})
	}
	return out
}
