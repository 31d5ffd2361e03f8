package sqlstore_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"strings"
	"testing"
	"time"

	"usersd/store"
	"usersd/store/storetest"
)

// TestPostgresNoticesComeFromOtherProcesses: a store hears of the changes that another store on the
// same database commits, as a replica hears of another replica's writes; it holds its listening
// connection only while someone waits for notices, and listens again after that connection is cut.
func TestPostgresNoticesComeFromOtherProcesses(t *testing.T) {
	// The test names its own connections, so that it finds and cuts only its own listener.
	name := "usersd-test-" + strings.ToLower(rand.Text()[:10])
	dsn := storetest.WithURLParam(t, storetest.PostgresSchema(t), "application_name", name)
	here, elsewhere := open(t, dsn), open(t, dsn)
	t.Cleanup(func() { here.Close(); elsewhere.Close() })
	admin := storetest.OpenPostgres(t, storetest.PostgresURL(t))

	if n := listeners(t, admin, name); n != 0 {
		t.Fatalf("%d listening connections before anyone waits, want none", n)
	}
	wake := make(chan struct{}, 1)
	stop := here.NotifyUserEvents(wake)
	waitForListeners(t, admin, name, 1)
	drain(wake)

	writeElsewhereAndHear := func(what string) {
		t.Helper()
		for i := range 3 {
			// The listener's own wake-up when it starts may be pending once; three writes in a row
			// each heard show that notices flow.
			drain(wake)
			if _, err := elsewhere.CreateUser(context.Background(), store.NewUser{Name: what}, nil); err != nil {
				t.Fatal(err)
			}
			select {
			case <-wake:
			case <-time.After(5 * time.Second):
				t.Fatalf("%s: write %d by the other store: no notice within 5s", what, i)
			}
		}
	}
	writeElsewhereAndHear("first")

	if _, err := admin.Exec(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE application_name = $1 AND query LIKE 'LISTEN%'`, name); err != nil {
		t.Fatal(err)
	}
	waitForListeners(t, admin, name, 1)
	writeElsewhereAndHear("after the listener was cut")

	stop()
	waitForListeners(t, admin, name, 0)
}

// listeners counts the open connections named name that listen for changes.
func listeners(t *testing.T, admin *sql.DB, name string) int {
	t.Helper()
	var n int
	if err := admin.QueryRow(`SELECT COUNT(*) FROM pg_stat_activity
		WHERE application_name = $1 AND query LIKE 'LISTEN%'`, name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func waitForListeners(t *testing.T, admin *sql.DB, name string, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := listeners(t, admin, name)
		if n == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d listening connections after 10s, want %d", n, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func drain(wake chan struct{}) {
	select {
	case <-wake:
	default:
	}
}
