package main

import (
	"fmt"
	"net/url"
)

// serverKind is the program a scenario measures.
type serverKind int

const (
	usersd serverKind = iota
	baselineHTTP
	baselineGRPC
)

// scenario is one row of the table: a server, the load put on it, and what it is compared with.
type scenario struct {
	id    string
	label string // what the row says, in the table
	// server is what runs pinned to CPU 0; users is the size of the data set it starts with (usersd
	// gets a fresh copy of the seeded file for every run, the baselines hold 1,000 users in a map).
	server serverKind
	users  int
	load   load
	// check asks the server once, before any load, and fails the run if the answer is wrong, so that
	// a fast server answering errors is never measured.
	check func(r *runner, addr string) error
	// compare names the scenario this one is measured against, and how: the ratio of req/s medians
	// (higher is better) or of p50 latency medians (lower is better), and the target for it.
	compare   string
	byLatency bool
	target    float64
	// creates marks the write scenario: its answers are counted by status, and after the run the
	// process is killed (SIGKILL) and the file is checked for every user it acknowledged.
	creates bool
}

const (
	thousand = 1_000
	million  = 1_000_000
	// grpcUserID is the user every gRPC request asks for (h2load sends one body); the HTTP/1.1
	// scenarios go through ids 1..1000 in turn.
	grpcUserID = 42
)

// Query strings of the list scenarios: the newest users first, and a page of one role in the
// default order (by id).
const (
	sortedQuery = "sort=-createdAt&limit=20"
	roleName    = "editor"
	rolePage    = 5
)

var roleQuery = fmt.Sprintf("role=%s&page=%d", url.QueryEscape(roleName), rolePage)

// scenarios lists every scenario in the order each round runs them.
func scenarios() []scenario {
	getByID := wrkLoad{conns: 64, path: "/users/{id}", ids: thousand}
	list := func(query string) wrkLoad { return wrkLoad{conns: 16, path: "/users?" + query} }
	grpc := h2loadLoad{conns: 16, streams: 16, path: "/users.v1.Users/GetUser", grpc: true}
	return []scenario{
		{id: "base-http", label: "baseline: net/http + encoding/json, GET /users/{id}", server: baselineHTTP, users: thousand,
			load: getByID, check: checkRESTUser},
		{id: "rest-get", label: "usersd REST GET /users/:id", server: usersd, users: thousand,
			load: getByID, check: checkRESTUser, compare: "base-http", target: 0.8},
		{id: "connect-get", label: "usersd Connect JSON GetUser (HTTP/1.1)", server: usersd, users: thousand,
			load:  wrkLoad{conns: 64, method: "POST", path: "/users.v1.Users/GetUser", body: `{"id":{id}}`, ids: thousand},
			check: checkConnectUser, compare: "base-http", target: 0.6},
		{id: "base-grpc", label: "baseline: grpc-go GetUser (h2c)", server: baselineGRPC, users: thousand,
			load: grpc, check: checkGRPCUser},
		{id: "grpc-get", label: "usersd gRPC GetUser (h2c)", server: usersd, users: thousand,
			load: grpc, check: checkGRPCUser, compare: "base-grpc", target: 0.5},
		{id: "rest-create", label: "usersd REST POST /users (with key)", server: usersd, users: thousand,
			load:  wrkLoad{conns: 64, method: "POST", path: "/users", body: `{"name":"Bench User","role":"viewer"}`, key: true, countStatus: true},
			check: checkUsersd, creates: true},
		{id: "list-sorted-1k", label: "usersd GET /users?" + sortedQuery + ", 1k users", server: usersd, users: thousand,
			load: list(sortedQuery), check: checkTotal(sortedQuery, "")},
		{id: "list-role-1k", label: "usersd GET /users?" + roleQuery + ", 1k users", server: usersd, users: thousand,
			load: list(roleQuery), check: checkTotal(roleQuery, roleName)},
		{id: "list-sorted-1m", label: "usersd GET /users?" + sortedQuery + ", 1M users", server: usersd, users: million,
			load: list(sortedQuery), check: checkTotal(sortedQuery, ""), compare: "list-sorted-1k", byLatency: true, target: 2},
		{id: "list-role-1m", label: "usersd GET /users?" + roleQuery + ", 1M users", server: usersd, users: million,
			load: list(roleQuery), check: checkTotal(roleQuery, roleName), compare: "list-role-1k", byLatency: true},
	}
}
