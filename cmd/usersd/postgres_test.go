package main

import (
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	usersv1 "usersd/gen/users/v1"
	"usersd/internal/apitest"
	"usersd/internal/proctest"
	"usersd/store/storetest"
)

// postgresTopology is a way that replicas reach PostgreSQL. database makes a database for the test
// alone and returns how a replica names it: -db, and any more flags it needs.
type postgresTopology struct {
	name     string
	database func(t *testing.T) (db string, flags []string)
}

// postgresTopologies are the ways the replica tests run: straight to the server, and through
// PgBouncer in transaction mode with -db-direct for the migrations and LISTEN.
var postgresTopologies = []postgresTopology{
	{"direct", func(t *testing.T) (string, []string) { return storetest.PostgresSchema(t), nil }},
	{"through PgBouncer", func(t *testing.T) (string, []string) {
		pooled, direct := storetest.StartPgBouncer(t).Database(t)
		return pooled, []string{"-db-direct", direct}
	}},
}

// eachTopology runs test once for each topology, as a subtest.
func eachTopology(t *testing.T, test func(t *testing.T, db string, flags []string)) {
	for _, topology := range postgresTopologies {
		t.Run(topology.name, func(t *testing.T) {
			db, flags := topology.database(t)
			test(t, db, flags)
		})
	}
}

// TestPostgresReplicasShareEverything runs three real usersd processes on one PostgreSQL database,
// as three replicas behind a load balancer, directly and through PgBouncer: creates spread over them
// all land in one set of users with unique ids, every replica lists the same users, and any replica
// can read, update and delete what another created, with etags and idempotency keys holding across
// replicas.
func TestPostgresReplicasShareEverything(t *testing.T) {
	t.Parallel() // checks what was kept, not how fast: see startProcess
	eachTopology(t, testReplicasShareEverything)
}

func testReplicasShareEverything(t *testing.T, db string, flags []string) {
	var replicas []*testServer
	for range 3 {
		_, s, _ := startProcess(t, db, flags...)
		replicas = append(replicas, s)
	}

	const clients, perClient = 20, 50
	var wg sync.WaitGroup
	failures := make(chan string, clients*perClient)
	for c := range clients {
		wg.Go(func() {
			for i := range perClient {
				s := replicas[(c*perClient+i)%len(replicas)]
				body := fmt.Sprintf(`{"name":"client %02d user %02d","role":"r%d"}`, c, i, c%4)
				res, err := postJSON(s.BaseURL+"/users", body)
				if err != nil || res != http.StatusCreated {
					failures <- fmt.Sprintf("client %d create %d on %s: %d %v", c, i, s.BaseURL, res, err)
				}
			}
		})
	}
	wg.Wait()
	close(failures)
	for f := range failures {
		t.Error(f)
	}
	if t.Failed() {
		t.FailNow()
	}

	var first []int
	for i, s := range replicas {
		ids := listAllIDs(t, s)
		if len(ids) != clients*perClient {
			t.Fatalf("replica %d lists %d users, want %d", i, len(ids), clients*perClient)
		}
		if unique := slices.Compact(slices.Sorted(slices.Values(ids))); len(unique) != len(ids) {
			t.Fatalf("replica %d lists %d users but only %d distinct ids", i, len(ids), len(unique))
		}
		if first == nil {
			first = ids
		} else if !slices.Equal(ids, first) {
			t.Fatalf("replica %d lists other users, or in another order, than replica 0", i)
		}
	}

	// One user through all three replicas.
	created := replicas[0].CreateUser(t, "travels", "")
	path := fmt.Sprintf("/users/%d", apitest.IDOf(t, created))
	read := replicas[1].Do(t, apitest.HTTP1Client, request{Method: "GET", Path: path})
	if read.Status != http.StatusOK || !maps.Equal(apitest.DecodeObject(t, read.Body), created) {
		t.Fatalf("replica 1 reads %d %s, want what replica 0 created: %v", read.Status, read.Body, created)
	}
	patch := func(s *testServer, etag, body string) response {
		return s.Do(t, apitest.HTTP1Client, request{Method: "PATCH", Path: path, Key: true, Body: body,
			Header: map[string]string{"Content-Type": "application/merge-patch+json", "If-Match": etag}})
	}
	updated := patch(replicas[2], read.Header.Get("ETag"), `{"role":"moved"}`)
	if updated.Status != http.StatusOK {
		t.Fatalf("replica 2 updates: %d %s", updated.Status, updated.Body)
	}
	if stale := patch(replicas[1], read.Header.Get("ETag"), `{"role":"lost"}`); stale.Status != http.StatusPreconditionFailed {
		t.Fatalf("replica 1 updates with the etag replica 2 has outdated: %d %s, want 412", stale.Status, stale.Body)
	}
	del := replicas[1].Do(t, apitest.HTTP1Client, request{Method: "DELETE", Path: path, Key: true, Header: map[string]string{"If-Match": updated.Header.Get("ETag")}})
	if del.Status != http.StatusNoContent {
		t.Fatalf("replica 1 deletes: %d %s", del.Status, del.Body)
	}
	for i, s := range replicas {
		if res := s.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: path}); res.Status != http.StatusNotFound {
			t.Fatalf("replica %d still reads the deleted user: %d", i, res.Status)
		}
	}

	// An idempotency key used on one replica is known to the others.
	create := request{Method: "POST", Path: "/users", Key: true, Body: `{"name":"once across replicas"}`,
		Header: map[string]string{"Content-Type": "application/json", "Idempotency-Key": "replicas"}}
	original := replicas[0].Do(t, apitest.HTTP1Client, create)
	if original.Status != http.StatusCreated {
		t.Fatalf("keyed create: %d %s", original.Status, original.Body)
	}
	apitest.WantReplay(t, original, replicas[1].Do(t, apitest.HTTP1Client, create))
	apitest.WantReplay(t, original, replicas[2].Do(t, apitest.H2CClient, create))
}

// postJSON creates through the REST API with the test key, without the testing.T helpers, so that it
// can run on any goroutine.
func postJSON(url, body string) (int, error) {
	status, _, err := postJSONAnswer(url, body)
	return status, err
}

// postJSONAnswer is postJSON that also returns the answer's body.
func postJSONAnswer(url, body string) (int, []byte, error) {
	req, err := http.NewRequest("POST", url, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-api-key", apitest.Key)
	res, err := apitest.HTTP1Client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	answer, err := io.ReadAll(res.Body)
	return res.StatusCode, answer, err
}

// writeUntilStopped keeps n clients creating users on base, each as fast as it can, until the
// returned stop is called (it waits for them); what they are answered does not matter.
func writeUntilStopped(base, prefix string, n int) (stop func()) {
	var stopping atomic.Bool
	var writers sync.WaitGroup
	for w := range n {
		writers.Go(func() {
			for i := 0; !stopping.Load(); i++ {
				postJSON(base+"/users", fmt.Sprintf(`{"name":"%s %d %d"}`, prefix, w, i))
			}
		})
	}
	return func() { stopping.Store(true); writers.Wait() }
}

// listAllIDs pages through GET /users and returns every id in order.
func listAllIDs(t *testing.T, s *testServer) []int {
	t.Helper()
	var ids []int
	for _, u := range listEveryUser(t, s) {
		ids = append(ids, apitest.IDOf(t, u))
	}
	return ids
}

// listEveryUser pages through GET /users, 100 at a time, and returns every user in order.
func listEveryUser(t *testing.T, s *testServer) []map[string]any {
	t.Helper()
	var all []map[string]any
	for page := 1; ; page++ {
		res := s.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: fmt.Sprintf("/users?limit=100&page=%d", page)})
		if res.Status != http.StatusOK {
			t.Fatalf("list page %d: %d %s", page, res.Status, res.Body)
		}
		users := apitest.DecodeArray(t, res.Body)
		if len(users) == 0 {
			return all
		}
		all = append(all, users...)
	}
}

// TestPostgresOutageIsUnavailableAndHeals puts a proxy between usersd and PostgreSQL and cuts it:
// while the database cannot be reached, every request that needs it is 503 (RPC unavailable) with
// no driver detail, /health says {"ok": false}, gRPC health says NOT_SERVING; once the proxy lets
// connections through again, usersd recovers by itself, without a restart.
func TestPostgresOutageIsUnavailableAndHeals(t *testing.T) {
	dsn := storetest.PostgresSchema(t)
	proxy := proctest.StartFaultProxy(t, dsn)
	s := startServerOn(t, proxy.DSN, nil)
	id := apitest.IDOf(t, s.CreateUser(t, "before the outage", ""))
	path := fmt.Sprintf("/users/%d", id)
	rpc := s.RPCClient(apitest.RPCProtocolNamed(t, "gRPC"), apitest.Key)

	proxy.Cut()
	for _, req := range []request{
		{Method: "GET", Path: path},
		{Method: "GET", Path: "/users"},
		{Method: "POST", Path: "/users", Header: apitest.JSONBody, Body: `{"name":"during the outage"}`, Key: true},
		{Method: "PATCH", Path: path, Header: apitest.JSONBody, Body: `{"role":"x"}`, Key: true},
	} {
		res := s.Do(t, apitest.HTTP1Client, req)
		if res.Status != http.StatusServiceUnavailable {
			t.Errorf("%s %s during the outage: %d %s, want 503", req.Method, req.Path, res.Status, res.Body)
			continue
		}
		if msg := res.ErrorMessage(t); msg != "the service is temporarily unavailable; retry later" {
			t.Errorf("%s %s during the outage says %q", req.Method, req.Path, msg)
		}
	}
	_, err := rpc.GetUser(t.Context(), &usersv1.GetUserRequest{Id: int32(id)})
	apitest.RPCWantCode(t, err, connect.CodeUnavailable)
	if res := s.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: "/health"}); res.Status != http.StatusServiceUnavailable || string(res.Body) != `{"ok":false}` {
		t.Errorf("/health during the outage: %d %s, want 503 {\"ok\":false}", res.Status, res.Body)
	}
	if status := grpcHealthStatus(t, s); status != 2 {
		t.Errorf("gRPC health during the outage: %d, want NOT_SERVING (2)", status)
	}

	proxy.Restore()
	deadline := time.Now().Add(15 * time.Second)
	for s.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: "/health"}).Status != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatal("/health did not recover within 15s of the database coming back")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if status := grpcHealthStatus(t, s); status != 1 {
		t.Errorf("gRPC health after the outage: %d, want SERVING (1)", status)
	}
	if res := s.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: path}); res.Status != http.StatusOK {
		t.Errorf("read after the outage: %d %s", res.Status, res.Body)
	}
	if _, err := rpc.GetUser(t.Context(), &usersv1.GetUserRequest{Id: int32(id)}); err != nil {
		t.Errorf("RPC read after the outage: %v", err)
	}
	s.CreateUser(t, "after the outage", "")
	if n := apitest.UserCount(t, s.BaseURL); n != "2" {
		t.Errorf("%s users after the outage, want 2: a write made during it was kept, or one after it lost", n)
	}
}

// grpcHealthStatus asks gRPC health about the whole server and returns the status number.
func grpcHealthStatus(t *testing.T, s *testServer) uint64 {
	t.Helper()
	return apitest.GRPCHealthStatus(t, s.BaseURL, "")
}

// TestTheDatabasePasswordNeverReachesTheLog starts usersd with a password in the database URL, in
// both places a URL can hold one, and looks for it in every log line. (The test server trusts local
// connections, so any password is accepted.)
func TestTheDatabasePasswordNeverReachesTheLog(t *testing.T) {
	const password = "pw-that-must-not-leak"
	dsn := storetest.PostgresSchema(t)
	withParam := storetest.WithURLParam(t, dsn, "password", password)
	u, _ := url.Parse(dsn)
	u.User = url.UserPassword(u.User.Username(), password)
	for _, dsn := range []string{withParam, u.String()} {
		s := startServerOn(t, dsn, nil)
		s.CreateUser(t, "logged", "")
		s.stop()
		if strings.Contains(s.logs.String(), password) {
			t.Fatalf("the log shows the database password:\n%s", s.logs)
		}
		if len(s.logs.Entries(map[string]any{"msg": "listening", "backend": "postgresql"})) != 1 {
			t.Fatalf("no listening line naming the backend in the log:\n%s", s.logs)
		}
	}
	// The start waits for an unreachable database, logging each attempt, for -db-wait.
	var log strings.Builder
	err := run(t.Context(), nil, []string{"-addr", "127.0.0.1:0", "-db-wait", "1s", "-db", "postgres://user:" + password + "@127.0.0.1:1/none"}, func(name string) string {
		if name == "USERS_API_KEYS" {
			return apitest.Key
		}
		return ""
	}, &log, io.Discard)
	if err == nil || strings.Contains(err.Error(), password) || !strings.Contains(err.Error(), "PostgreSQL") {
		t.Fatalf("start on an unreachable database: %v; want an error that names PostgreSQL and hides the password", err)
	}
	if strings.Contains(log.String(), password) || !strings.Contains(log.String(), "waiting for the database") {
		t.Fatalf("the log of a start on an unreachable database shows the password, or no wait:\n%s", log.String())
	}
}

// TestTextNoUserCanHoldIsAClientErrorOnPostgres: PostgreSQL refuses text with a NUL or that is not
// UTF-8 in any statement, which was a 500; such a filter is refused before it reaches the store.
func TestTextNoUserCanHoldIsAClientErrorOnPostgres(t *testing.T) {
	s := startServerOn(t, storetest.PostgresSchema(t), nil)
	for _, query := range []string{"role=%00", "role=admin%00", "role=%FF", "namePrefix=%00", "namePrefix=%FF"} {
		res := s.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: "/users?" + query})
		if res.Status != http.StatusBadRequest {
			t.Errorf("GET /users?%s: %d %s, want 400", query, res.Status, res.Body)
			continue
		}
		res.ErrorMessage(t)
	}
	for _, p := range apitest.RPCProtocols {
		_, err := s.RPCClient(p, "").ListUsers(t.Context(), &usersv1.ListUsersRequest{Role: "admin\x00"})
		apitest.RPCWantCode(t, err, connect.CodeInvalidArgument)
	}
}
