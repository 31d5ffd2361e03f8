// Every route of the service, in one place: the RPC services, the REST resource, the service's own
// routes and the static files.
package handlers

import (
	"io/fs"
	"net/http"
	"slices"

	"connectrpc.com/connect"
	"connectrpc.com/grpcreflect"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"

	"usersd/auth"
	usersv1 "usersd/gen/users/v1"
	"usersd/gen/users/v1/usersv1connect"
	"usersd/handlers/apierror"
	"usersd/handlers/boundedgzip"
	"usersd/handlers/codec"
	"usersd/handlers/health"
	"usersd/handlers/static"
	"usersd/handlers/webhookrest"
	"usersd/openapi"
	"usersd/scim"
	"usersd/web"

	_ "google.golang.org/grpc/reflection/grpc_reflection_v1"      // reflection describes itself
	_ "google.golang.org/grpc/reflection/grpc_reflection_v1alpha" // in both versions
)

// compressMinBytes is the smallest RPC answer that is compressed when the client accepts it.
const compressMinBytes = 4 << 10

func addRoutes(routes *routeTable, d deps) error {
	service, errs := d.users, d.errs
	rpcOptions := []connect.HandlerOption{
		connect.WithCodec(codec.All[0]), connect.WithCodec(codec.All[1]), connect.WithCodec(codec.All[2]),
		connect.WithReadMaxBytes(int(d.MaxBodyBytes)),
		boundedgzip.HandlerOption(d.MaxBodyBytes),
		// gRPC clients offer gzip on every call; compressing a user of a few hundred bytes costs more
		// CPU than the bytes it saves, so only answers of a page or more are compressed.
		connect.WithCompressMinBytes(compressMinBytes),
		connect.WithInterceptors(recordCodes{}, apierror.Sanitize{Logger: d.Logger}),
	}

	// RPC: gRPC, gRPC-Web and Connect on one handler. Every method that is not marked
	// NO_SIDE_EFFECTS in the proto changes data and needs users.write, so a new RPC is protected by
	// default; the others read users and need users.read (or nothing while reads are public);
	// every method that streams its answer is a stream route, so a new one has no request deadline.
	// The users service's methods get their call as REST's do (rpcCalls), and its answers, the only
	// ones that grow large, are held against the answer budget.
	usersOptions := append(slices.Clip(rpcOptions), connect.WithInterceptors(rpcCalls{}, spendAnswerBudget{}))
	usersPath, usersRPC := usersv1connect.NewUsersHandler(rpcUsers{service}, usersOptions...)
	routes.rpc(usersPath, usersRPC, rpcMethods(usersv1.File_users_v1_users_proto.Services().ByName("Users")))
	healthPath, healthRPC := d.health.Handler(rpcOptions...)
	routes.rpc(healthPath, healthRPC, []rpcMethod{
		{name: "Check", reads: "it answers the serving status"},
		{name: "Watch", reads: "it streams the serving status", stream: true},
		{name: "List", reads: "it answers the serving status of every service"},
	})
	// Reflection describes every service served, itself included, as grpc-go's does (the blank
	// imports of grpc's reflection packages register the descriptors it describes itself with).
	served := []string{usersv1connect.UsersName, health.ServiceName, grpcreflect.ReflectV1ServiceName, grpcreflect.ReflectV1AlphaServiceName}
	if d.Webhooks != nil {
		// Subscriptions, reads included, need webhooks.manage whether reads of users are public or not.
		methods := rpcMethods(usersv1.File_users_v1_users_proto.Services().ByName("Webhooks"))
		for i := range methods {
			methods[i].reads, methods[i].scope = "", auth.ScopeWebhooks
		}
		webhooksPath, webhooksRPC := usersv1connect.NewWebhooksHandler(d.Webhooks, rpcOptions...)
		routes.rpc(webhooksPath, webhooksRPC, methods)
		served = append(served, usersv1connect.WebhooksName)
		for _, r := range webhookrest.Routes(d.Webhooks, restShared(errs)) {
			routes.protected(r.Pattern, auth.ScopeWebhooks, r.Handler)
		}
	}
	for _, extra := range d.ExtraServices {
		addExtraService(routes, extra, rpcOptions)
		served = append(served, string(extra.Descriptor.FullName()))
	}
	reflector := grpcreflect.NewStaticReflector(served...)
	for _, newReflection := range []func(*grpcreflect.Reflector, ...connect.HandlerOption) (string, http.Handler){
		grpcreflect.NewHandlerV1, grpcreflect.NewHandlerV1Alpha,
	} {
		reflectionPath, reflection := newReflection(reflector, rpcOptions...)
		routes.rpc(reflectionPath, reflection, []rpcMethod{{name: "ServerReflectionInfo", reads: "it only describes the services", clientStream: true}})
	}

	// REST: reads need users.read (or nothing while reads are public), writes users.write.
	routes.read("GET /users", listUsersREST(service, errs))
	routes.protected("POST /users", auth.ScopeWrite, createUserREST(service, errs))
	routes.watch("GET /users/events", watchUsersREST(service, errs))
	routes.read("GET /users:batchGet", batchGetUsersREST(service, errs))
	routes.protected("POST /users:batchCreate", auth.ScopeWrite, batchCreateUsersREST(service, errs))
	routes.protected("POST /users:batchDelete", auth.ScopeWrite, batchDeleteUsersREST(service, errs))
	routes.read("GET /users/{id}", getUserREST(service, errs))
	routes.protected("PUT /users/{id}", auth.ScopeWrite, replaceUserREST(service, errs))
	routes.protected("PATCH /users/{id}", auth.ScopeWrite, updateUserREST(service, errs))
	routes.protected("DELETE /users/{id}", auth.ScopeWrite, deleteUserREST(service, errs))
	routes.protected("POST /users/{id}:undelete", auth.ScopeWrite, undeleteUserREST(service, errs))
	routes.read("GET /users/{id}/posts", listPostsREST(service, errs))
	routes.protected("POST /users/{id}/posts", auth.ScopeWrite, createPostREST(service, errs))

	// SCIM 2.0, for identity providers: every route that reads or changes users needs its scope
	// whether reads are public or not; the discovery documents describe the service only.
	bulkOperation := func(h http.Handler) http.Handler { return routes.auth.require(auth.ScopeWrite, false, true, h) }
	for _, r := range scim.Routes(service, errs.write, bulkOperation) {
		routes.scim(r.Pattern, r.Scope, r.Handler)
	}

	// The service's own routes.
	routes.public("GET /health", healthREST(d.health), "")
	routes.public("GET /livez", livezREST(), "")
	routes.public("GET /readyz", readyzREST(d.health), "")
	routes.public("GET /info", infoREST(errs), "")
	routes.public("POST /echo", echoREST(errs), "it only answers with the JSON it was sent")
	routes.protected("GET /private", auth.ScopeRead, privateREST(errs))
	routes.public("GET /boom", boomREST(), "")

	// The REST contract (/openapi.json) and the static files of the page at the root, each file
	// its own route.
	for _, folder := range []fs.FS{openapi.FS, web.Public} {
		files, err := static.Routes(folder)
		if err != nil {
			return err
		}
		for _, file := range files {
			routes.public(file.Pattern, file.Handler, "")
		}
	}
	return routes.err
}

// rpcMethods lists the service's methods, as its descriptor declares them. Every method that is not
// marked NO_SIDE_EFFECTS may change data, so a new method needs a key unless the proto says it only
// reads, and then users.read; a method that streams its answer (and reads no stream) is a stream
// route.
func rpcMethods(service protoreflect.ServiceDescriptor) []rpcMethod {
	var out []rpcMethod
	methods := service.Methods()
	for i := range methods.Len() {
		m := methods.Get(i)
		options, _ := m.Options().(*descriptorpb.MethodOptions)
		method := rpcMethod{name: string(m.Name()), stream: m.IsStreamingServer() && !m.IsStreamingClient(), clientStream: m.IsStreamingClient()}
		if options.GetIdempotencyLevel() == descriptorpb.MethodOptions_NO_SIDE_EFFECTS {
			method.reads, method.scope = "the proto marks it NO_SIDE_EFFECTS", auth.ScopeRead
		}
		out = append(out, method)
	}
	return out
}
