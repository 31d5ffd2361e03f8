// A real PostgreSQL for tests: where to find it, what to do when there is none, and a schema of
// each test's own so that tests (and test runs) never see each other's rows.
package storetest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
)

// DefaultPostgresURL is the server that tests try when USERS_TEST_POSTGRES is not set.
const DefaultPostgresURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

var (
	probeOnce sync.Once
	probeErr  error
)

// PostgresURL returns the URL of the test server: USERS_TEST_POSTGRES, or DefaultPostgresURL. When
// no server answers there, the test is skipped with a message that says how to run it, unless
// USERS_REQUIRE_POSTGRES=1, which makes it fail instead (CI sets it, so CI never skips).
func PostgresURL(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv("USERS_TEST_POSTGRES")
	if dsn == "" {
		dsn = DefaultPostgresURL
	}
	probeOnce.Do(func() {
		db, err := sql.Open("pgx", dsn)
		if err != nil {
			probeErr = err
			return
		}
		defer db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		probeErr = db.PingContext(ctx)
	})
	if probeErr != nil {
		skipUnlessRequired(t, "USERS_REQUIRE_POSTGRES", fmt.Sprintf("no PostgreSQL answers at %s (%v). To run this test, "+
			"start one and set USERS_TEST_POSTGRES to its URL (default %s)", redactURL(dsn), probeErr, DefaultPostgresURL))
	}
	return dsn
}

// skipUnlessRequired skips the test for want of what message says, and how to get it, unless the
// variable required is 1, which makes it fail instead (CI sets every such variable, so that CI
// never skips).
func skipUnlessRequired(t testing.TB, required, message string) {
	t.Helper()
	message += "; set " + required + "=1 to fail instead of skip"
	if os.Getenv(required) == "1" {
		t.Fatal(message)
	}
	t.Skip(message)
}

// PostgresSchema creates a schema for the test alone and returns the server's URL with that schema
// as its search_path, so that everything the test creates lands there. The schema is dropped with
// everything in it when the test ends.
func PostgresSchema(t testing.TB) string {
	t.Helper()
	base := PostgresURL(t)
	schema := "usersd_test_" + strings.ToLower(rand.Text()[:12])
	admin := OpenPostgres(t, base)
	if _, err := admin.Exec(`CREATE SCHEMA ` + schema); err != nil {
		t.Fatalf("create schema %s: %v", schema, err)
	}
	t.Cleanup(func() {
		if _, err := admin.Exec(`DROP SCHEMA ` + schema + ` CASCADE`); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return WithURLParam(t, base, "search_path", schema)
}

// OpenPostgres opens a pool on dsn for the test's own statements; it is closed when the test ends.
func OpenPostgres(t testing.TB, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// WithURLParam returns dsn with the query parameter name set to value.
func WithURLParam(t testing.TB, dsn, name, value string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil || u.Scheme == "" {
		t.Fatalf("the test PostgreSQL must be given as a postgres:// URL, got %s", redactURL(dsn))
	}
	q := u.Query()
	q.Set(name, value)
	u.RawQuery = q.Encode()
	return u.String()
}

// redactURL hides a password in a URL, for messages.
func redactURL(dsn string) string {
	if u, err := url.Parse(dsn); err == nil {
		return u.Redacted()
	}
	return "(an unparseable URL)"
}
