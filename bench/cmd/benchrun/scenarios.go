package main

import (
	"fmt"
	"net/url"
	"time"
)

// serverKind is the program a scenario measures.
type serverKind int

const (
	usersd serverKind = iota
	baselineHTTP
	baselineGRPC
)

// backend is the database usersd runs on.
type backend string

const (
	sqlite   backend = "sqlite"
	postgres backend = "postgres"
)

// label is how the report names the backend.
func (b backend) label() string {
	if b == postgres {
		return "PostgreSQL"
	}
	return "SQLite"
}

// scenario is one row of the table: a server, the load put on it, and what it is compared with.
type scenario struct {
	id    string
	label string // what the row says, in the table
	// server is what runs pinned to CPU 0; users is the size of the data set it starts with, on
	// backend for usersd (the baselines hold 1,000 users in a map). Read-only usersd runs share the
	// cached data set; write runs get a fresh copy.
	server serverKind
	bin    string // the usersd build: "" for the one of this checkout, againstBin for --against's
	// serverArgs are flags that usersd gets besides the address and the database.
	serverArgs []string
	backend    backend
	users      int
	load       load
	// prepare, when set, runs once the server listens and before the first check: it asks the
	// server for what the load needs (a page token deep in the collection) and keeps it in the runner.
	prepare func(r *runner, addr string) error
	// check asks the server once, before any load and again after it, and fails the run if the
	// answer is wrong, so that a fast server answering errors is never measured.
	check func(r *runner, addr string) error
	// compares are the scenarios this one is measured against.
	compares []comparison
	// creates marks a write scenario: its answers are counted by status; after the run the total
	// that usersd reports must equal the users in the database, and after SIGKILL every user it
	// acknowledged must be there.
	creates bool
	// writes marks a scenario that changes users without creating any (a PATCH): it runs on a fresh
	// copy of the data set, as a create does, and is checked after as a read is.
	writes bool
	// warm, warmFor and measureFor, when set, replace the warm-up's load and the -warmup and
	// -duration of every other scenario: for a measurement whose method is fixed (create-outside).
	warm                load
	warmFor, measureFor time.Duration
}

// warming returns the load and duration of the warm-up: the scenario's own, or -warmup's.
func (sc scenario) warming(flagged time.Duration) (load, time.Duration) {
	l, d := sc.load, flagged
	if sc.warm != nil {
		l = sc.warm
	}
	if sc.warmFor > 0 {
		d = sc.warmFor
	}
	return l, d
}

// measuring returns how long the scenario is measured: its own duration, or -duration's.
func (sc scenario) measuring(flagged time.Duration) time.Duration {
	if sc.measureFor > 0 {
		return sc.measureFor
	}
	return flagged
}

// comparison is a ratio of this scenario's medians to another's: of req/s (higher is better) or of
// p50 latency (lower is better), with a target for it (0: none) and why when there is none.
type comparison struct {
	against   string
	byLatency bool
	target    float64
	note      string
}

const (
	thousand = 1_000
	million  = 1_000_000
	// grpcUserID is the user every gRPC request asks for (h2load sends one body); the HTTP/1.1
	// scenarios go through ids 1..1000 in turn.
	grpcUserID = 42
)

// protocolScenarios are the scenarios that compare usersd's protocols with the baselines, on 1,000
// users in SQLite, and the durable write.
func protocolScenarios() []scenario {
	getByID := wrkLoad{conns: 64, path: "/users/{id}", ids: thousand}
	grpc := h2loadLoad{conns: 16, streams: 16, path: "/users.v1.Users/GetUser", grpc: true}
	return []scenario{
		{id: "base-http", label: "baseline: net/http + encoding/json, GET /users/{id}", server: baselineHTTP, users: thousand,
			load: getByID, check: checkRESTUser},
		{id: "rest-get", label: "usersd REST GET /users/:id", server: usersd, backend: sqlite, users: thousand,
			load: getByID, check: checkRESTUser, compares: []comparison{{against: "base-http", target: 0.8}}},
		{id: "connect-get", label: "usersd Connect JSON GetUser (HTTP/1.1)", server: usersd, backend: sqlite, users: thousand,
			load:  wrkLoad{conns: 64, method: "POST", path: "/users.v1.Users/GetUser", body: `{"id":{id}}`, ids: thousand},
			check: checkConnectUser, compares: []comparison{{against: "base-http", target: 0.6}}},
		{id: "base-grpc", label: "baseline: grpc-go GetUser (h2c)", server: baselineGRPC, users: thousand,
			load: grpc, check: checkGRPCUser},
		{id: "grpc-get", label: "usersd gRPC GetUser (h2c)", server: usersd, backend: sqlite, users: thousand,
			load: grpc, check: checkGRPCUser, compares: []comparison{{against: "base-grpc", target: 0.35}}}, // the cost-budget issue's target for Go 1.27
		{id: "rest-create", label: "usersd REST POST /users (with key)", server: usersd, backend: sqlite, users: thousand,
			load: createLoad(64), check: checkTotal("limit=1", wantOneOfAll),
			creates: true},
		createOutside(),
	}
}

// createOutside is a create measured the way a client of usersd as it ships would measure it, a
// method fixed whatever -warmup and -duration say: a new SQLite file (usersd makes it), 2 s of
// creates at 16 connections, then 5 s measured at 64, usersd's whole CPU over those 5 s.
func createOutside() scenario {
	load := createLoad(64)
	load.body = `{"name":"Budget Writer","role":"editor"}`
	warm := load
	warm.conns = 16
	return scenario{id: "create-outside", label: "usersd REST POST /users (with key) on a new SQLite file, 2 s at 16 conns, 5 s measured at 64",
		server: usersd, backend: sqlite, users: 0, load: load, warm: warm, warmFor: 2 * time.Second, measureFor: 5 * time.Second,
		check: checkTotal("limit=1", wantOneOfAll), creates: true}
}

// defaultScenarios are what bench/run runs without --sizes or --backends: the protocol scenarios and
// the first-page and role lists on 1,000 users in SQLite, and with million the same lists on
// 1,000,000.
func defaultScenarios(million bool) []scenario {
	todo := protocolScenarios()
	sizes := []int{thousand}
	if million {
		sizes = append(sizes, 1_000_000)
	}
	for _, n := range sizes {
		for _, sc := range scaleScenarios(n, sqlite) {
			if sc.id == scaleID("list-sorted", n, sqlite) || sc.id == scaleID("list-role", n, sqlite) {
				todo = append(todo, sc)
			}
		}
	}
	return todo
}

// roleQuery is the role filter's query: a page of one role in the default order (by id).
const (
	roleName = "editor"
	rolePage = 5
)

var roleQuery = fmt.Sprintf("role=%s&page=%d", url.QueryEscape(roleName), rolePage)

// createLoad is POST /users with the API key, counted by status.
func createLoad(conns int) wrkLoad {
	return wrkLoad{conns: conns, method: "POST", path: "/users", body: `{"name":"Bench User","role":"viewer"}`, key: true, countStatus: true}
}

// identityCreateLoad is createLoad with a user name, an email and an external id, each unique, so
// that every create writes an entry into each of the unique indexes of identity.
func identityCreateLoad(conns int) wrkLoad {
	l := createLoad(conns)
	l.body = `{"name":"Bench User","role":"viewer","userName":"bench-{seq}","email":"bench-{seq}@example.com","externalId":"ext-{seq}"}`
	return l
}
