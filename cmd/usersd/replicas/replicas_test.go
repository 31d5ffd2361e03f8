// The tests of usersd processes as the replicas of one service on PostgreSQL: straight to the
// server and through PgBouncer, with standbys for reads, and through faults (a black hole, a frozen
// replica, a silent listening connection, a failover). They are a package of their own, beside
// cmd/usersd's, so that their minutes of waiting on clusters and faults run beside that package's
// tests instead of inside its time.
package replicas_test

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"usersd/internal/apitest"
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
				res, _, err := apitest.PostJSON(s.BaseURL+"/users", body)
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
		ids := s.ListIDs(t)
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

// writeUntilStopped keeps n clients creating users on base, each as fast as it can, until the
// returned stop is called (it waits for them); what they are answered does not matter.
func writeUntilStopped(base, prefix string, n int) (stop func()) {
	var stopping atomic.Bool
	var writers sync.WaitGroup
	for w := range n {
		writers.Go(func() {
			for i := 0; !stopping.Load(); i++ {
				apitest.PostJSON(base+"/users", fmt.Sprintf(`{"name":"%s %d %d"}`, prefix, w, i))
			}
		})
	}
	return func() { stopping.Store(true); writers.Wait() }
}
