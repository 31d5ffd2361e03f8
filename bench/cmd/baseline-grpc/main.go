// Command baseline-grpc is the gRPC ceiling: users.v1.Users/GetUser answered from a map by
// google.golang.org/grpc on its own HTTP/2 transport, with the same users as the benchmark's usersd.
// The service is described by hand (no protoc-gen-go-grpc) and uses usersd's generated messages.
package main

import (
	"context"
	"flag"
	"log"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"usersd/bench/internal/fixture"
	"usersd/bench/internal/profiler"
	usersv1 "usersd/gen/users/v1"
)

// usersServer is what the hand-written service description dispatches to.
type usersServer interface {
	GetUser(context.Context, *usersv1.GetUserRequest) (*usersv1.User, error)
}

type mapServer map[int32]*usersv1.User

func (m mapServer) GetUser(_ context.Context, req *usersv1.GetUserRequest) (*usersv1.User, error) {
	u, ok := m[req.GetId()]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "user %d not found", req.GetId())
	}
	return u, nil
}

// serviceDesc is what protoc-gen-go-grpc would generate for the GetUser method of users.v1.Users.
var serviceDesc = grpc.ServiceDesc{
	ServiceName: "users.v1.Users",
	HandlerType: (*usersServer)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "GetUser",
		Handler: func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
			in := new(usersv1.GetUserRequest)
			if err := dec(in); err != nil {
				return nil, err
			}
			if interceptor == nil {
				return srv.(usersServer).GetUser(ctx, in)
			}
			info := &grpc.UnaryServerInfo{Server: srv, FullMethod: "/users.v1.Users/GetUser"}
			return interceptor(ctx, in, info, func(ctx context.Context, req any) (any, error) {
				return srv.(usersServer).GetUser(ctx, req.(*usersv1.GetUserRequest))
			})
		},
	}},
	Metadata: "users/v1/users.proto",
}

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "address to listen on")
	n := flag.Int("users", 1000, "number of users in the map")
	admin := flag.String("admin-addr", "", "serve Go's profiler on this address (bench/run --profile)")
	flag.Parse()
	profiler.Serve(*admin)

	users := make(mapServer, *n)
	for _, u := range fixture.All(*n) {
		users[u.ID] = &usersv1.User{
			Id: u.ID, Name: u.Name, Role: u.Role,
			CreatedAt: timestamppb.New(u.CreatedAt), UpdatedAt: timestamppb.New(u.CreatedAt),
			Etag: fixture.ETag(u.Version),
		}
	}

	server := grpc.NewServer()
	server.RegisterService(&serviceDesc, users)
	l, err := fixture.Listen(*addr, os.Stdout)
	if err != nil {
		log.Fatal(err)
	}
	log.Fatal(server.Serve(l))
}
