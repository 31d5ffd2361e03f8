package replicas_test

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"testing"
	"time"

	"connectrpc.com/connect"

	usersv1 "usersd/gen/users/v1"
	"usersd/internal/apitest"
	"usersd/internal/proctest"
	"usersd/store/storetest"
	"usersd/users"
)

// TestStandbysNeverAnswerATokenWithOlderData runs the binary against a real cluster with both
// standbys' replay paused: every write's token, sent back on REST and on every RPC protocol, reads
// that write; reads without one come from a standby only while it lags less than the limit.
func TestStandbysNeverAnswerATokenWithOlderData(t *testing.T) {
	for _, throughPgBouncer := range []bool{false, true} {
		t.Run(map[bool]string{false: "primary direct", true: "primary through PgBouncer"}[throughPgBouncer], func(t *testing.T) {
			testStandbysNeverAnswerATokenWithOlderData(t, throughPgBouncer)
		})
	}
}

func testStandbysNeverAnswerATokenWithOlderData(t *testing.T, throughPgBouncer bool) {
	if throughPgBouncer {
		needPgBouncer(t) // before the cluster, which takes seconds to build, not after it
	}
	c := storetest.StartCluster(t)
	adminAddr := proctest.FreeLoopbackAddr(t)
	flags := []string{"-db-read", c.Sync.URL() + " " + c.Async.URL(), "-db-read-max-lag", "500ms", "-admin-addr", adminAddr}
	db := c.Primary.URL()
	if throughPgBouncer {
		db = storetest.StartPgBouncerFor(t, c.Primary.URL()).Pooled(t, db)
		flags = append(flags, "-db-direct", c.Primary.URL())
	}
	_, s, _ := startProcess(t, db, flags...)
	admin := &testServer{Server: apitest.Server{BaseURL: "http://" + adminAddr}}
	before := s.CreateUser(t, "before the pause", "")
	time.Sleep(500 * time.Millisecond) // both standbys replay it
	c.Sync.PauseReplay(t)
	c.Async.PauseReplay(t)
	paused := time.Now()

	// Within the lag limit an untokened read may come from a standby: what it had replayed.
	res := s.Do(t, apitest.H2CClient, apitest.Request{Method: "GET", Path: fmt.Sprintf("/users/%d", apitest.IDOf(t, before))})
	if res.Status != http.StatusOK {
		t.Fatalf("a user written before the pause: %d %s", res.Status, res.Body)
	}

	for i := 0; time.Since(paused) < 2*time.Second; i++ {
		// REST: the token of a create reads it at once, from the primary, since no standby has it.
		created := s.Do(t, apitest.H2CClient, apitest.Request{Method: "POST", Path: "/users", Key: true,
			Header: map[string]string{"Content-Type": "application/json"}, Body: fmt.Sprintf(`{"name":"rest %d"}`, i)})
		token := created.Header.Get(users.ConsistencyTokenHeader)
		if created.Status != http.StatusCreated || token == "" {
			t.Fatalf("create: %d %s, token %q", created.Status, created.Body, token)
		}
		path := fmt.Sprintf("/users/%d", apitest.IDOf(t, apitest.DecodeObject(t, created.Body)))
		read := s.Do(t, apitest.H2CClient, apitest.Request{Method: "GET", Path: path, Header: map[string]string{users.ConsistencyTokenHeader: token}})
		if read.Status != http.StatusOK {
			t.Fatalf("GET %s with the create's token, %v after the pause: %d %s", path, time.Since(paused), read.Status, read.Body)
		}
		// Every RPC protocol: the same with metadata.
		for _, p := range apitest.RPCProtocols {
			client := s.RPCClient(p, apitest.Key)
			ctx, info := connect.NewClientContext(t.Context())
			u, err := client.CreateUser(ctx, &usersv1.CreateUserRequest{User: &usersv1.User{Name: fmt.Sprintf("%s %d", p.Name, i)}})
			apitest.RPCMust(t, p.Name+" CreateUser", err)
			ctx, readInfo := connect.NewClientContext(t.Context())
			readInfo.RequestHeader().Set(users.ConsistencyTokenHeader, info.ResponseHeader().Get(users.ConsistencyTokenHeader))
			got, err := client.GetUser(ctx, &usersv1.GetUserRequest{Id: u.GetUser().GetId()})
			apitest.RPCMust(t, fmt.Sprintf("%s GetUser with the create's token, %v after the pause", p.Name, time.Since(paused)), err)
			if got.GetName() != u.GetUser().GetName() {
				t.Fatalf("%s: read %q with the token of %q", p.Name, got.GetName(), u.GetUser().GetName())
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Past the limit, an untokened read is the primary's: it sees what the standbys do not.
	list := s.Do(t, apitest.H2CClient, apitest.Request{Method: "GET", Path: "/users?limit=1&sort=-id"})
	if list.Status != http.StatusOK || list.Header.Get("X-Total-Count") == "1" {
		t.Fatalf("an untokened list 2 s into the pause: %d, X-Total-Count %s; want the primary's count",
			list.Status, list.Header.Get("X-Total-Count"))
	}

	reads := func(target, reason string) float64 {
		return admin.Metric(t, "usersd_db_reads_total", map[string]string{"target": target, "reason": reason})
	}
	if reads("primary", "not_replayed") == 0 || reads("primary", "no_fresh_standby") == 0 || reads("standby", "fresh") == 0 {
		t.Errorf("read routes: primary not_replayed %v, primary no_fresh_standby %v, standby fresh %v; want each counted",
			reads("primary", "not_replayed"), reads("primary", "no_fresh_standby"), reads("standby", "fresh"))
	}
	for _, sb := range []*storetest.Server{c.Sync, c.Async} {
		lag := admin.Metric(t, "usersd_db_standby_lag_seconds", map[string]string{"standby": sb.Hostport()})
		if lag < 1.5 {
			t.Errorf("standby %s paused 2 s ago reports a lag of %v s", sb.Name, lag)
		}
	}

	// Replaying again, the standbys serve tokened reads themselves.
	c.Sync.ResumeReplay(t)
	c.Async.ResumeReplay(t)
	time.Sleep(500 * time.Millisecond)
	replayed := reads("standby", "replayed")
	for i := range 20 {
		created := s.Do(t, apitest.H2CClient, apitest.Request{Method: "POST", Path: "/users", Key: true,
			Header: map[string]string{"Content-Type": "application/json"}, Body: fmt.Sprintf(`{"name":"after %d"}`, i)})
		path := fmt.Sprintf("/users/%d", apitest.IDOf(t, apitest.DecodeObject(t, created.Body)))
		read := s.Do(t, apitest.H2CClient, apitest.Request{Method: "GET", Path: path,
			Header: map[string]string{users.ConsistencyTokenHeader: created.Header.Get(users.ConsistencyTokenHeader)}})
		if read.Status != http.StatusOK {
			t.Fatalf("GET %s with its token after the resume: %d %s", path, read.Status, read.Body)
		}
	}
	if reads("standby", "replayed") == replayed {
		t.Error("no tokened read went to a standby once they replayed again")
	}
}

// needPgBouncer ends the test, as storetest.StartPgBouncerFor would, when there is no pgbouncer
// binary where it looks for one (USERS_TEST_PGBOUNCER, Debian's /usr/sbin/pgbouncer, PATH): a test
// that builds a cluster first asks here, so that it does not build one only to skip.
func needPgBouncer(t *testing.T) {
	t.Helper()
	if os.Getenv("USERS_TEST_PGBOUNCER") != "" {
		return
	}
	if _, err := os.Stat("/usr/sbin/pgbouncer"); err == nil {
		return
	}
	if _, err := exec.LookPath("pgbouncer"); err == nil {
		return
	}
	proctest.MissingTool(t, "USERS_REQUIRE_PGBOUNCER", "no pgbouncer binary: install Debian's pgbouncer "+
		"(apt-get install pgbouncer) or set USERS_TEST_PGBOUNCER to one")
}
