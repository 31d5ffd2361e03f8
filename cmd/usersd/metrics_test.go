package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"

	"connectrpc.com/connect"
	dto "github.com/prometheus/client_model/go"

	usersv1 "usersd/gen/users/v1"
	"usersd/internal/apitest"
)

// seriesCount counts the series of the service's own families (usersd_*), a histogram's buckets
// each as one.
func seriesCount(families map[string]*dto.MetricFamily) int {
	n := 0
	for name, f := range families {
		if !strings.HasPrefix(name, "usersd_") {
			continue
		}
		for _, m := range f.GetMetric() {
			n++
			if m.Histogram != nil {
				n += len(m.Histogram.GetBucket()) + 1 // the buckets and the sum
			}
		}
	}
	return n
}

// TestMetricsCountRequestsByRouteProtocolAndCode: one request over each protocol is counted once,
// under its route pattern (never the raw path), its protocol and the code its client got, and timed;
// a miss is counted as unmatched; refused API keys, refused idempotency keys and replays have
// their own counters; store calls are timed by operation, and the pools report their statistics.
func TestMetricsCountRequestsByRouteProtocolAndCode(t *testing.T) {
	s := startServerOn(t, t.TempDir()+"/users.db", map[string]string{"USERS_ADMIN_ADDR": "127.0.0.1:0"})
	admin := adminServer(t, s)
	id := apitest.IDOf(t, s.CreateUser(t, "ada", "admin"))

	s.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: fmt.Sprintf("/users/%d", id)})
	s.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: "/users/999999"})
	s.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: "/no/such/thing"})
	s.Do(t, apitest.HTTP1Client, request{Method: "POST", Path: "/users", Header: apitest.JSONBody, Body: `{"name":"x"}`})
	s.Do(t, apitest.HTTP1Client, request{Method: "POST", Path: "/users", Body: `{"name":"x"}`,
		Header: map[string]string{"Content-Type": "application/json", "x-api-key": "wrong"}})
	for range 2 { // the second is a replay
		s.Do(t, apitest.HTTP1Client, request{Method: "POST", Path: "/users", Body: `{"name":"kept"}`, Key: true,
			Header: map[string]string{"Content-Type": "application/json", "Idempotency-Key": `"k-1"`}})
	}
	s.Do(t, apitest.HTTP1Client, request{Method: "POST", Path: "/users", Body: `{"name":"other"}`, Key: true,
		Header: map[string]string{"Content-Type": "application/json", "Idempotency-Key": `"k-1"`}})
	for _, p := range apitest.RPCProtocols {
		client := s.RPCClient(p, "")
		if _, err := client.GetUser(context.Background(), &usersv1.GetUserRequest{Id: int32(id)}); err != nil {
			t.Fatalf("%s GetUser: %v", p.Name, err)
		}
		_, err := client.GetUser(context.Background(), &usersv1.GetUserRequest{Id: 999999})
		if connect.CodeOf(err) != connect.CodeNotFound {
			t.Fatalf("%s GetUser of no user: %v", p.Name, err)
		}
	}

	// Refused before the method runs: by connect, which cannot read the message, and by the key check.
	s.Do(t, apitest.HTTP1Client, request{Method: "POST", Path: "/users.v1.Users/GetUser", Header: apitest.JSONBody, Body: `{"id":`})
	s.Do(t, apitest.HTTP1Client, request{Method: "POST", Path: "/users.v1.Users/CreateUser", Header: apitest.JSONBody, Body: `{"name":"x"}`})
	s.Do(t, apitest.H2CClient, request{Method: "POST", Path: "/users.v1.Users/GetUser", Body: "\x00\x00\x00\x00\x02\xff\xff",
		Header: map[string]string{"Content-Type": "application/grpc", "TE": "trailers"}}) // a message of two bytes that are no protobuf

	families := admin.Metrics(t)
	requests := func(route, method, protocol, code string) map[string]string {
		return map[string]string{"route": route, "method": method, "protocol": protocol, "code": code}
	}
	for _, c := range []struct {
		family string
		labels map[string]string
		want   float64
	}{
		{"usersd_requests_total", requests("/users/{id}", "GET", "rest", "200"), 1},
		{"usersd_requests_total", requests("/users/{id}", "GET", "rest", "404"), 1},
		{"usersd_requests_total", requests("unmatched", "GET", "rest", "404"), 1},
		{"usersd_requests_total", requests("/users", "POST", "rest", "201"), 3}, // ada, and kept twice: a replay is a 201 too
		{"usersd_requests_total", requests("/users", "POST", "rest", "401"), 2}, // no key, and a wrong one
		{"usersd_requests_total", requests("/users", "POST", "rest", "422"), 1},
		{"usersd_requests_total", requests("/users.v1.Users/GetUser", "POST", "connect", "ok"), 2}, // binary and JSON
		{"usersd_requests_total", requests("/users.v1.Users/GetUser", "POST", "connect", "not_found"), 2},
		{"usersd_requests_total", requests("/users.v1.Users/GetUser", "POST", "connect", "invalid_argument"), 1},
		{"usersd_requests_total", requests("/users.v1.Users/CreateUser", "POST", "connect", "unauthenticated"), 1},
		{"usersd_requests_total", requests("/users.v1.Users/GetUser", "POST", "grpc", "ok"), 1},
		{"usersd_requests_total", requests("/users.v1.Users/GetUser", "POST", "grpc", "not_found"), 1},
		{"usersd_requests_total", requests("/users.v1.Users/GetUser", "POST", "grpc", "invalid_argument"), 1},
		{"usersd_requests_total", requests("/users.v1.Users/GetUser", "POST", "grpc-web", "ok"), 1},
		{"usersd_requests_total", requests("/users.v1.Users/GetUser", "POST", "grpc-web", "not_found"), 1},
		{"usersd_request_duration_seconds", map[string]string{"route": "/users/{id}", "method": "GET", "protocol": "rest"}, 2},
		{"usersd_request_duration_seconds", map[string]string{"route": "/users.v1.Users/GetUser", "method": "POST", "protocol": "grpc"}, 3},
		{"usersd_requests_in_flight", map[string]string{}, 0},
		{"usersd_refused_keys_total", map[string]string{"key": "api_key", "reason": "missing"}, 2},
		{"usersd_refused_keys_total", map[string]string{"key": "api_key", "reason": "invalid"}, 1},
		{"usersd_refused_keys_total", map[string]string{"key": "idempotency_key", "reason": "reused"}, 1},
		{"usersd_idempotent_replays_total", map[string]string{}, 1},
		{"usersd_store_errors_total", map[string]string{"operation": "GetUser", "kind": "not_found"}, 5}, // REST and four RPCs
		{"usersd_store_errors_total", map[string]string{"operation": "BeginRequest", "kind": "request_mismatch"}, 1},
		// ada read from the database once, then four times from the cache; no user five times.
		{"usersd_user_cache_lookups_total", map[string]string{"result": "hit"}, 4},
		{"usersd_user_cache_lookups_total", map[string]string{"result": "miss"}, 6},
		{"usersd_user_cache_users", map[string]string{}, 1},
	} {
		got, ok := apitest.Sample(families, c.family, c.labels)
		if !ok || got != c.want {
			t.Errorf("%s%v = %v (present: %v), want %v", c.family, c.labels, got, ok, c.want)
		}
	}
	// The user was read once from the database and then from the cache; the misses each time.
	if got, _ := apitest.Sample(families, "usersd_store_operation_duration_seconds", map[string]string{"operation": "GetUser"}); got < 6 {
		t.Errorf("store GetUser timed %v times, want at least 6 (one read of the user, five of no user)", got)
	}
	for _, pool := range []string{"reader", "writer"} {
		if _, ok := apitest.Sample(families, "go_sql_max_open_connections", map[string]string{"db_name": pool}); !ok {
			t.Errorf("no statistics of the %s pool (go_sql_max_open_connections{db_name=%q})", pool, pool)
		}
	}
	for _, family := range []string{"go_goroutines", "process_cpu_seconds_total"} {
		if _, ok := families[family]; !ok {
			t.Errorf("no %s", family)
		}
	}
}

// TestUnknownPathsAndIDsAddNoSeries: label values come from fixed sets. Once one request of each
// kind has been answered, 10,000 more to random unknown paths, random ids, random procedures and
// made-up methods add no series to /metrics.
func TestUnknownPathsAndIDsAddNoSeries(t *testing.T) {
	s := startServerOn(t, t.TempDir()+"/users.db", map[string]string{"USERS_ADMIN_ADDR": "127.0.0.1:0"})
	admin := adminServer(t, s)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}} // no contract check: these are misses on purpose
	kinds := []func(r *rand.Rand) (method, path string){
		func(r *rand.Rand) (string, string) { return "GET", fmt.Sprintf("/%x/%x", r.Uint64(), r.Uint32()) },
		func(r *rand.Rand) (string, string) { return "GET", fmt.Sprintf("/users/%d", 1_000_000+r.IntN(1<<30)) },
		func(r *rand.Rand) (string, string) { return "GET", fmt.Sprintf("/users/x%x", r.Uint64()) },
		func(r *rand.Rand) (string, string) {
			return "GET", fmt.Sprintf("/users/%d/posts", 1_000_000+r.IntN(1<<30))
		},
		func(r *rand.Rand) (string, string) { return "POST", fmt.Sprintf("/users.v1.Users/M%x", r.Uint64()) },
		func(r *rand.Rand) (string, string) { return fmt.Sprintf("X%X", r.Uint32()), "/users" },
	}
	send := func(r *rand.Rand, kind int) error {
		method, path := kinds[kind](r)
		req, err := http.NewRequest(method, s.BaseURL+path, nil)
		if err != nil {
			return err
		}
		res, err := client.Do(req)
		if err != nil {
			return fmt.Errorf("%s %s: %w", method, path, err)
		}
		res.Body.Close()
		if res.StatusCode < 400 {
			return fmt.Errorf("%s %s: %d, want a miss", method, path, res.StatusCode)
		}
		return nil
	}
	warm := rand.New(rand.NewPCG(1, 1))
	for kind := range kinds {
		if err := send(warm, kind); err != nil {
			t.Fatal(err)
		}
	}
	before := seriesCount(admin.Metrics(t))

	const requests, workers = 10_000, 8
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 2))
			for i := range requests / workers {
				if err := send(r, i%len(kinds)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()

	families := admin.Metrics(t)
	if after := seriesCount(families); after != before {
		t.Errorf("%d random misses took the service's series from %d to %d", requests, before, after)
	}
	total := 0.0
	for _, m := range families["usersd_requests_total"].GetMetric() {
		total += m.GetCounter().GetValue()
	}
	if want := float64(requests + len(kinds)); total != want {
		t.Errorf("usersd_requests_total sums to %v, want %v: every request counted once", total, want)
	}
}
