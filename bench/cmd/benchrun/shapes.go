package main

import "fmt"

// shapeScenarios are GetUser over each protocol at three shapes of load: one connection with one
// request at a time (1x1), 16 connections with one each (16x1), and 16 HTTP/2 connections with 16
// streams each (16x16). They measure what depends on how requests share connections, such as
// batching writes, rather than the work of a request. REST and Connect JSON run on HTTP/1.1 (wrk)
// and on h2c (h2load); HTTP/1.1 has no streams, so it has no 16x16.
func shapeScenarios() []scenario {
	type shape struct{ conns, streams int }
	shapes := []shape{{1, 1}, {16, 1}, {16, 16}}
	var out []scenario
	add := func(id, label string, l load, check func(*runner, string) error) {
		out = append(out, scenario{id: id, label: label, server: usersd, backend: sqlite, users: thousand, load: l, check: check})
	}
	for _, s := range shapes {
		name := fmt.Sprintf("%dx%d", s.conns, s.streams)
		if s.streams == 1 {
			add("shape-rest-h1-"+name, "REST GET /users/:id, HTTP/1.1, "+name,
				wrkLoad{conns: s.conns, path: "/users/{id}", ids: thousand}, checkRESTUser)
			add("shape-connect-h1-"+name, "Connect JSON GetUser, HTTP/1.1, "+name,
				wrkLoad{conns: s.conns, method: "POST", path: "/users.v1.Users/GetUser", body: `{"id":{id}}`, ids: thousand}, checkConnectUser)
		}
		add("shape-rest-h2-"+name, "REST GET /users/:id, h2c, "+name,
			h2loadLoad{conns: s.conns, streams: s.streams, path: fmt.Sprintf("/users/%d", grpcUserID)}, checkRESTUser)
		add("shape-connect-h2-"+name, "Connect JSON GetUser, h2c, "+name,
			h2loadLoad{conns: s.conns, streams: s.streams, path: "/users.v1.Users/GetUser", json: fmt.Sprintf(`{"id":%d}`, grpcUserID)}, checkConnectUser)
		add("shape-grpc-"+name, "gRPC GetUser, h2c, "+name,
			h2loadLoad{conns: s.conns, streams: s.streams, path: "/users.v1.Users/GetUser", grpc: true}, checkGRPCUser)
	}
	return out
}
