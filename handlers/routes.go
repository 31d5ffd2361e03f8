// Every route of the service, in one place: the RPC services, the REST resource, the service's own
// routes and the static files.
package handlers

import (
	"io/fs"
	"net/http"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"

	usersv1 "usersd/gen/users/v1"
	"usersd/gen/users/v1/usersv1connect"
	"usersd/openapi"
	"usersd/web"
)

// compressMinBytes is the smallest RPC answer that is compressed when the client accepts it.
const compressMinBytes = 4 << 10

func addRoutes(routes *routeTable, d deps) error {
	users, errs := d.users, d.errs
	// mountRPC mounts each method of an RPC service at its own path, and records the service's path
	// with the error writer, so that the paths whose errors are written in the RPC protocol are
	// exactly the ones mounted here. A method that is not mounted is then a miss under an RPC path,
	// answered unimplemented in the caller's protocol (connect's handler would answer plain text).
	// A method needs a key unless it says why it only reads.
	mountRPC := func(path string, h http.Handler, methods []rpcMethod) {
		errs.rpcPrefixes = append(errs.rpcPrefixes, path) // first: the route table asks it which routes are RPCs
		for _, m := range methods {
			if m.reads == "" {
				routes.protected(path+m.name, h)
			} else {
				routes.public(path+m.name, h, m.reads)
			}
		}
	}
	rpcOptions := []connect.HandlerOption{
		connect.WithCodec(jsonCodecs[0]), connect.WithCodec(jsonCodecs[1]), connect.WithCodec(protoCodec{}),
		connect.WithReadMaxBytes(int(d.MaxBodyBytes)),
		withBoundedGzip(d.MaxBodyBytes),
		// gRPC clients offer gzip on every call; compressing a user of a few hundred bytes costs more
		// CPU than the bytes it saves, so only answers of a page or more are compressed.
		connect.WithCompressMinBytes(compressMinBytes),
		connect.WithInterceptors(recordCodes{}, sanitizeErrors{d.Logger}),
	}

	// RPC: gRPC, gRPC-Web and Connect on one handler. Every method that is not marked
	// NO_SIDE_EFFECTS in the proto changes data and needs a key, so a new RPC is protected by default.
	usersPath, usersRPC := usersv1connect.NewUsersHandler(users, rpcOptions...)
	mountRPC(usersPath, usersRPC, rpcMethods(usersv1.File_users_v1_users_proto.Services().ByName("Users")))
	healthPath, healthRPC := grpchealth.NewHandler(d.health, rpcOptions...)
	mountRPC(healthPath, healthRPC, []rpcMethod{
		{name: "Check", reads: "it answers the serving status"},
		{name: "Watch", reads: "it streams the serving status"},
	})
	reflector := grpcreflect.NewStaticReflector(usersv1connect.UsersName, grpchealth.HealthV1ServiceName)
	for _, newReflection := range []func(*grpcreflect.Reflector, ...connect.HandlerOption) (string, http.Handler){
		grpcreflect.NewHandlerV1, grpcreflect.NewHandlerV1Alpha,
	} {
		reflectionPath, reflection := newReflection(reflector, rpcOptions...)
		mountRPC(reflectionPath, reflection, []rpcMethod{{name: "ServerReflectionInfo", reads: "it only describes the services"}})
	}

	// REST: reads are public, writes need a key.
	routes.public("GET /users", listUsersREST(users, errs), "")
	routes.protected("POST /users", createUserREST(users, errs))
	routes.public("GET /users/events", watchUsersREST(users, errs), "")
	routes.public("GET /users/{id}", getUserREST(users, errs), "")
	routes.protected("PUT /users/{id}", replaceUserREST(users, errs))
	routes.protected("PATCH /users/{id}", updateUserREST(users, errs))
	routes.protected("DELETE /users/{id}", deleteUserREST(users, errs))
	routes.public("GET /users/{id}/posts", listPostsREST(users, errs), "")
	routes.protected("POST /users/{id}/posts", createPostREST(users, errs))

	// The service's own routes.
	routes.public("GET /health", healthREST(d.health), "")
	routes.public("GET /info", infoREST(errs), "")
	routes.public("POST /echo", echoREST(errs), "it only answers with the JSON it was sent")
	routes.protected("GET /private", privateREST(errs))
	routes.public("GET /boom", boomREST(), "")

	// The REST contract (/openapi.json) and the static files of the page at the root, each file
	// its own route.
	for _, files := range []fs.FS{openapi.FS, web.Public} {
		if err := addStaticRoutes(routes, files); err != nil {
			return err
		}
	}
	return routes.err
}

// watchPaths are the paths of the watches of users, which last as long as their clients watch and
// so have no request deadline (see withRequestContext).
var watchPaths = []string{"/users/events", usersv1connect.UsersWatchUsersProcedure}

// rpcMethod is a method of an RPC service. reads says why the method changes nothing; it is empty
// for a method that may change data, which then needs a key.
type rpcMethod struct {
	name  string
	reads string
}

// rpcMethods lists the service's methods. Every method that is not marked NO_SIDE_EFFECTS may change
// data, so a new method needs a key unless the proto says it only reads.
func rpcMethods(service protoreflect.ServiceDescriptor) []rpcMethod {
	var out []rpcMethod
	methods := service.Methods()
	for i := range methods.Len() {
		m := methods.Get(i)
		options, _ := m.Options().(*descriptorpb.MethodOptions)
		method := rpcMethod{name: string(m.Name())}
		if options.GetIdempotencyLevel() == descriptorpb.MethodOptions_NO_SIDE_EFFECTS {
			method.reads = "the proto marks it NO_SIDE_EFFECTS"
		}
		out = append(out, method)
	}
	return out
}
