package sqlstore_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"testing"
	"time"

	"usersd/store"
	"usersd/store/sqlstore"
	"usersd/store/storetest"
)

func TestSQLiteFileConformance(t *testing.T) {
	t.Parallel() // a store of its own: see open in sqlite_test.go
	storetest.Run(t, func(t *testing.T, now func() time.Time) store.Store {
		return open(t, filepath.Join(t.TempDir(), "users.db"), sqlstore.WithClock(now))
	})
}

// TestSQLiteFileConformanceWithoutBatching runs the suite with every write in a transaction of its
// own (-write-batch 1), the path that a measurement of group commit compares with.
func TestSQLiteFileConformanceWithoutBatching(t *testing.T) {
	t.Parallel() // a store of its own: see open in sqlite_test.go
	storetest.Run(t, func(t *testing.T, now func() time.Time) store.Store {
		return open(t, filepath.Join(t.TempDir(), "users.db"), sqlstore.WithClock(now), sqlstore.WithWriteBatch(1))
	})
}

func TestSQLiteInMemoryConformance(t *testing.T) {
	t.Parallel() // a store of its own: see open in sqlite_test.go
	storetest.Run(t, func(t *testing.T, now func() time.Time) store.Store {
		return open(t, ":memory:", sqlstore.WithClock(now))
	})
}

func TestReopeningAFileKeepsItsData(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nested", "users.db")
	first := open(t, path)
	u, err := first.CreateUser(context.Background(), store.NewUser{Name: "persistent"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	second := open(t, path) // runs the migrations again: they must see they are applied
	defer second.Close()
	got, err := second.GetUser(context.Background(), u.ID)
	if err != nil || got.Name != "persistent" {
		t.Fatalf("after reopening: %+v, %v", got, err)
	}
}

func TestOpenRejectsAmbiguousPaths(t *testing.T) {
	t.Chdir(t.TempDir()) // where a value taken for a file name would create it
	for _, dsn := range []string{"", "users.db?mode=ro", "file:users.db", "postgres://localhost:1/db",
		"host=localhost user=app dbname=users", "dbname=users", "mysql://app@localhost/users"} {
		if s, err := sqlstore.Open(context.Background(), dsn); err == nil {
			s.Close()
			t.Errorf("Open(%q) succeeded, want an error", dsn)
		}
	}
	if made, _ := os.ReadDir("."); len(made) > 0 {
		t.Fatalf("refused values made files: %v", made)
	}
}

// open opens the store at dsn for a test.
//
// The longest tests here, the conformance suites and the tests with a cluster of their own, run
// beside each other (t.Parallel), two at a time on two cores: each works on a store of its own (a
// file, a schema, a cluster on ports of its own), and much of their time is spent waiting on
// PostgreSQL, fsync and the start of servers. The tests that read by the clock how fresh a standby
// is (TestStandbysServeFreshReadsAndTheirWritersSeeThem, TestAPausedStandbyIsNeverReadPastItsLag...)
// stay serial, and so run while nothing else of this package does.
func open(t *testing.T, dsn string, opts ...sqlstore.Option) *sqlstore.Store {
	t.Helper()
	s, err := sqlstore.Open(context.Background(), dsn, opts...)
	if err != nil {
		t.Fatalf("open %s: %v", dsn, err)
	}
	return s
}

// TestTheCountsMigrationCountsExistingUsers upgrades a database that predates the count table (as
// one made before migration 0003 would be): the migration must count the users already there.
func TestTheCountsMigrationCountsExistingUsers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "users.db")
	s := open(t, path)
	for _, role := range []string{"admin", "admin", "reader", ""} {
		if _, err := s.CreateUser(context.Background(), store.NewUser{Name: "existing", Role: role}, nil); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, undo := range []string{ // back to the schema before 0003, data kept
		`DROP TRIGGER users_count_insert`, `DROP TRIGGER users_count_delete`, `DROP TRIGGER users_count_role`,
		`DROP TABLE user_counts`, `DELETE FROM schema_migrations WHERE version = 3`,
	} {
		if _, err := db.Exec(undo); err != nil {
			t.Fatalf("%s: %v", undo, err)
		}
	}
	db.Close()

	upgraded := open(t, path)
	defer upgraded.Close()
	for role, want := range map[string]int64{"": 4, "admin": 2, "reader": 1} {
		page, err := upgraded.ListUsers(context.Background(), store.UserQuery{Role: role, Limit: 1})
		if err != nil || page.Total != want {
			t.Errorf("after the upgrade, total for role %q: %d, %v; want %d", role, page.Total, err, want)
		}
	}
}
