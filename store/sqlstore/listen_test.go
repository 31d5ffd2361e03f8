package sqlstore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"usersd/store"
	"usersd/store/sqlstore"
	"usersd/store/storetest"
)

// TestPostgresNoticesComeFromOtherProcesses: a store hears of the changes that another store on the
// same schema commits, as a replica hears of another replica's writes, and not of those in another
// schema of the database; it holds its listening connection only while someone waits for notices,
// and listens again, on a new connection, after that one is cut, logging the loss and the recovery
// once each.
func TestPostgresNoticesComeFromOtherProcesses(t *testing.T) {
	// The test names its own connections, so that it finds and cuts only its own listener.
	name := "usersd-test-" + strings.ToLower(rand.Text()[:10])
	dsn := storetest.WithURLParam(t, storetest.PostgresSchema(t), "application_name", name)
	var logs lockedBuffer
	here, elsewhere := open(t, dsn, sqlstore.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil)))), open(t, dsn)
	t.Cleanup(func() { here.Close(); elsewhere.Close() })
	admin := storetest.OpenPostgres(t, storetest.PostgresURL(t))

	if n := listeners(t, admin, name); n != 0 {
		t.Fatalf("%d listening connections before anyone waits, want none", n)
	}
	wake := make(chan struct{}, 1)
	stop := here.NotifyUserEvents(wake)
	first := waitForListener(t, admin, name, 0)
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

	otherSchema := open(t, storetest.PostgresSchema(t))
	t.Cleanup(func() { otherSchema.Close() })
	drain(wake)
	if _, err := otherSchema.CreateUser(context.Background(), store.NewUser{Name: "another deployment"}, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wake:
		t.Fatal("a notice of a write in another schema")
	case <-time.After(300 * time.Millisecond):
	}

	if _, err := admin.Exec(`SELECT pg_terminate_backend($1)`, first); err != nil {
		t.Fatal(err)
	}
	waitForListener(t, admin, name, first)
	writeElsewhereAndHear("after the listener was cut")
	lost, back := strings.Count(logs.String(), `"level":"WARN","msg":"not listening for other replicas' changes`),
		strings.Count(logs.String(), `"level":"INFO","msg":"listening for other replicas' changes again"`)
	if lost != 1 || back != 1 {
		t.Fatalf("the log tells of %d losses and %d recoveries of the listener, want 1 each:\n%s", lost, back, logs.String())
	}

	stop()
	deadline := time.Now().Add(10 * time.Second)
	for n := listeners(t, admin, name); n != 0; n = listeners(t, admin, name) {
		if time.Now().After(deadline) {
			t.Fatalf("%d listening connections 10s after the last subscriber stopped, want none", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// lockedBuffer is a buffer that a logger on another goroutine writes to while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
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

// waitForListener waits for a listening connection named name other than the one of process
// not (0 for any), and returns its server process id.
func waitForListener(t *testing.T, admin *sql.DB, name string, not int) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var pid int
		err := admin.QueryRow(`SELECT pid FROM pg_stat_activity
			WHERE application_name = $1 AND query LIKE 'LISTEN%' AND pid <> $2`, name, not).Scan(&pid)
		switch {
		case err == nil:
			return pid
		case !errors.Is(err, sql.ErrNoRows):
			t.Fatal(err)
		case time.Now().After(deadline):
			t.Fatalf("no listening connection (other than %d) after 10s", not)
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
