package main

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"usersd/internal/apitest"
	"usersd/internal/proctest"
	"usersd/store/storetest"
)

// TestStartingBeforeTheDatabaseAnswers starts usersd while its PostgreSQL refuses connections: it
// listens at once, /livez is 200 while /readyz and every route are 503, and once the database
// answers it serves without a restart. Before, it exited at once.
func TestStartingBeforeTheDatabaseAnswers(t *testing.T) {
	dsn := storetest.PostgresSchema(t)
	proxy := proctest.StartFaultProxy(t, dsn)
	proxy.Cut()
	_, s, _ := startProcess(t, proxy.DSN)
	for _, c := range []struct {
		path   string
		status int
	}{{"/livez", 200}, {"/readyz", 503}, {"/health", 503}, {"/users", 503}} {
		res := s.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: c.path})
		if res.Status != c.status {
			t.Fatalf("%s while the database is awaited: %d %s; want %d", c.path, res.Status, res.Body, c.status)
		}
		if c.status == 503 && c.path != "/health" && (res.Header.Get("Retry-After") == "" || !strings.Contains(res.ErrorMessage(t), "starting")) {
			t.Fatalf("%s: %v %s; want a 503 that says the service is starting, with Retry-After", c.path, res.Header, res.Body)
		}
	}
	proxy.Restore()
	deadline := time.Now().Add(20 * time.Second)
	for s.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: "/readyz"}).Status != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatal("/readyz is not 200 20 s after the database came back")
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.CreateUser(t, "after the wait", "")
}

// TestStartingGivesUpOnWhatWaitingWillNotMend: a database that answers with a refusal (no such
// database) ends the start at once, and one that does not answer ends it after -db-wait; each is
// one line on stderr and exit 1. "At once" and "after -db-wait" are told from the default
// -db-wait of 5 minutes, which either would take if it were wrong: atMost is a minute for both,
// a bound on correctness that a busy machine cannot reach (it was 10 and 15 s, which one could).
func TestStartingGivesUpOnWhatWaitingWillNotMend(t *testing.T) {
	dsn := storetest.PostgresSchema(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/no_such_database_here"
	missing := u.String()
	proxy := proctest.StartFaultProxy(t, dsn)
	proxy.Cut()
	for _, c := range []struct {
		name    string
		args    []string
		want    string
		atLeast time.Duration
		atMost  time.Duration
	}{
		{"a database that does not exist", []string{"-db", missing}, "no_such_database_here", 0, time.Minute},
		{"a database that does not answer within -db-wait", []string{"-db", proxy.DSN, "-db-wait", "2s"}, "did not answer within 2s", 2 * time.Second, time.Minute},
	} {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			_, stderr, code := runBinary(t, []string{"USERS_API_KEYS=" + apitest.Key}, append(c.args, "-addr", "127.0.0.1:0")...)
			took := time.Since(start)
			if code != 1 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, c.want) || took < c.atLeast || took > c.atMost {
				t.Fatalf("exit %d after %v, stderr %q; want exit 1 after %v to %v, one line saying %q", code, took, stderr, c.atLeast, c.atMost, c.want)
			}
		})
	}
}

// TestStartingThroughAPoolerWithoutDbDirectStopsAtOnce: -db naming PgBouncer without -db-direct is
// refused by the pooler at every connection (usersd's session limits are startup parameters it does
// not know). The start ends at once, in one line that says to set -db-direct, instead of waiting out
// -db-wait as if the database were down.
func TestStartingThroughAPoolerWithoutDbDirectStopsAtOnce(t *testing.T) {
	bouncer := storetest.StartPgBouncer(t)
	pooled, _ := bouncer.Database(t)
	start := time.Now()
	_, stderr, code := runBinary(t, []string{"USERS_API_KEYS=" + apitest.Key}, "-db", pooled, "-db-wait", "1m", "-addr", "127.0.0.1:0")
	took := time.Since(start)
	if code != 1 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "set -db-direct") || took > 30*time.Second {
		t.Fatalf("exit %d after %v, stderr %q; want exit 1 at once, one line saying to set -db-direct", code, took, stderr)
	}
}
