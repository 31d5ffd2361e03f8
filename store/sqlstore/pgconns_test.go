package sqlstore

import (
	"context"
	"crypto/rand"
	"testing"
	"time"

	"usersd/store/storetest"
)

// TestPostgresCloseWaitsForAStoppedStatementsCancel: a statement whose context ends mid-way
// leaves pgx cancelling it on the server in the background. Close returns only after that cancel
// has been delivered and the connection closed, so that a replica which stops does not leave a
// cancel request half sent to a pooler (PgBouncer 1.18 stops on one) or a statement running on
// the server.
func TestPostgresCloseWaitsForAStoppedStatementsCancel(t *testing.T) {
	dsn := storetest.PostgresSchema(t)
	s, err := Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	admin := storetest.OpenPostgres(t, dsn)
	statement := "SELECT pg_sleep(30) -- " + rand.Text()
	running := func() int {
		t.Helper()
		var n int
		if err := admin.QueryRow(`SELECT count(*) FROM pg_stat_activity WHERE query = $1`, statement).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	ended, end := context.WithCancel(t.Context())
	stopped := make(chan error, 1)
	go func() {
		_, err := s.writer.ExecContext(ended, statement)
		stopped <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); running() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the statement did not start")
		}
	}
	end()
	if err := <-stopped; err == nil {
		t.Fatal("the statement whose context ended succeeded")
	}
	closing := time.Now()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// The cancel takes milliseconds: a Close that waited out its bound found it done by chance.
	if took := time.Since(closing); took > closeWait/2 {
		t.Errorf("Close took %v", took)
	}
	if n := running(); n != 0 {
		t.Fatalf("after Close, the stopped statement's connection is still open (%d)", n)
	}
}

// TestPostgresCloseDoesNotWaitForARequestsConnection: a connection that a request still holds
// when the store closes (a drain cut short by a second signal) closes only when the request lets
// go of it, so Close does not wait for it.
func TestPostgresCloseDoesNotWaitForARequestsConnection(t *testing.T) {
	s, err := Open(t.Context(), storetest.PostgresSchema(t))
	if err != nil {
		t.Fatal(err)
	}
	held, err := s.writer.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	closing := time.Now()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(closing); took > closeWait/2 {
		t.Fatalf("Close took %v with a connection held", took)
	}
}
