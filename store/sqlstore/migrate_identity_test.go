package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"usersd/store"
	"usersd/store/storetest"
)

// previousRelease is the last migration of each backend before the identity fields: the schema
// that the release before them wrote.
var previousRelease = map[string]int{"sqlite": 10, "postgres": 14}

// migrateThrough brings the database at dsn to the schema of migration last, as an older release
// of usersd would have left it, and returns a connection pool on it.
func migrateThrough(t *testing.T, dsn string, last int) *sql.DB {
	t.Helper()
	ctx := context.Background()
	s := &Store{now: time.Now}
	var db *sql.DB
	if isPostgresURL(dsn) {
		pg, err := openPostgres(ctx, dsn, false, new(pgConns))
		if err != nil {
			t.Fatal(err)
		}
		s.dialect, db = &postgresDialect, pg
	} else {
		reader, writer, pinger, err := openSQLite(dsn)
		if err != nil {
			t.Fatal(err)
		}
		reader.Close()
		pinger.Close()
		s.dialect, db = &sqliteDialect, writer
	}
	t.Cleanup(func() { db.Close() })
	ms, err := s.dialect.migrations()
	if err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.version <= last {
			if err := s.apply(ctx, conn, m); err != nil {
				t.Fatalf("%s: %v", m.name, err)
			}
		}
	}
	return db
}

type backendDSN struct {
	name string
	dsn  func(t *testing.T) string
}

var bothBackends = []backendDSN{
	{"sqlite", func(t *testing.T) string { return filepath.Join(t.TempDir(), "users.db") }},
	{"postgres", func(t *testing.T) string { return storetest.PostgresSchema(t) }},
}

// TestAnOlderDatabaseMigratesToTheIdentityFields opens a database that the release before the
// identity fields wrote, with users, posts and changes in it: every user reads back as it was,
// active and with no identity, and the unique indexes hold from then on.
func TestAnOlderDatabaseMigratesToTheIdentityFields(t *testing.T) {
	t.Parallel()
	for _, backend := range bothBackends {
		t.Run(backend.name, func(t *testing.T) {
			ctx := context.Background()
			dsn := backend.dsn(t)
			old := migrateThrough(t, dsn, previousRelease[backend.name])
			const users = 50
			for i := range users {
				name := fmt.Sprintf("Old user %d", i)
				// The columns, and only those, that the previous release's CreateUser wrote.
				if _, err := old.Exec(`INSERT INTO users (name, name_key, role, created_at, updated_at, version, changed_by, changed_by_type)
					VALUES ($1, $2, 'old', 1000, 2000, 3, 'key', 1)`, name, store.NameKey(name)); err != nil {
					t.Fatal(err)
				}
			}
			old.Close()

			s, err := Open(ctx, dsn)
			if err != nil {
				t.Fatalf("open the older database: %v", err)
			}
			defer s.Close()
			page, err := s.ListUsers(ctx, store.UserQuery{Limit: users + 1})
			if err != nil || len(page.Items) != users || page.Total != users {
				t.Fatalf("listed %d of %d users (%v), want %d", len(page.Items), page.Total, err, users)
			}
			for _, listed := range page.Items {
				u, err := s.GetUser(ctx, listed.ID)
				if err != nil || u.Role != "old" || u.Version != 3 || u.Inactive || u.UserName != "" || u.Email != "" || len(u.Labels) != 0 {
					t.Fatalf("user %d after the upgrade: %+v (%v), want it as it was, active, with no identity", listed.ID, u, err)
				}
			}
			events, err := s.UserEvents(ctx, 0, users+1)
			if err != nil || len(events.Events) != users || events.Events[0].User.Inactive {
				t.Fatalf("the log after the upgrade: %d changes (%v), want %d, each of an active user", len(events.Events), err, users)
			}
			first, last := page.Items[0], page.Items[users-1]
			name := "ada"
			if _, err := s.UpdateUser(ctx, first.ID, store.UserChanges{UserName: &name}, nil); err != nil {
				t.Fatal(err)
			}
			upper := "ADA"
			if _, err := s.UpdateUser(ctx, last.ID, store.UserChanges{UserName: &upper}, nil); !errors.Is(err, store.ErrAlreadyExists) {
				t.Fatalf("a clash after the upgrade: %v, want ErrAlreadyExists", err)
			}
		})
	}
}

// TestAMigrationOutsideATransactionRunsAgainSafely runs PostgreSQL's concurrent index builds,
// which PostgreSQL refuses inside a transaction, then forgets that they ran and opens the database
// again: the file runs a second time, as after a crash half way through it, and leaves every
// index valid.
func TestAMigrationOutsideATransactionRunsAgainSafely(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := storetest.PostgresSchema(t)
	s, err := Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := s.dialect.migrations()
	if err != nil {
		t.Fatal(err)
	}
	outside := slices.IndexFunc(ms, func(m migration) bool { return m.outsideTransaction })
	if outside < 0 {
		t.Fatal("no PostgreSQL migration runs outside a transaction")
	}
	if _, err := s.writer.Exec(`DELETE FROM schema_migrations WHERE version = $1`, ms[outside].version); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s, err = Open(ctx, dsn); err != nil {
		t.Fatalf("open again, with %s to run again: %v", ms[outside].name, err)
	}
	defer s.Close()
	var valid, invalid int
	err = s.writer.QueryRow(`SELECT COUNT(*) FILTER (WHERE i.indisvalid), COUNT(*) FILTER (WHERE NOT i.indisvalid)
		FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
		WHERE c.relname LIKE 'users_%_unique' AND c.relnamespace = current_schema()::regnamespace`).Scan(&valid, &invalid)
	if err != nil || valid != 3 || invalid != 0 {
		t.Fatalf("%d valid and %d invalid unique indexes (%v), want 3 valid", valid, invalid, err)
	}
}

// TestMigrationStatementsSplitAtLineEnds: a file run outside a transaction is split into its
// statements, without its comments.
func TestMigrationStatementsSplitAtLineEnds(t *testing.T) {
	got := migrationStatements("-- usersd:no-transaction\n-- why\nDROP INDEX a;\n\nCREATE INDEX b\n    ON t (c);\nSELECT 1")
	want := []string{"DROP INDEX a;", "CREATE INDEX b\n    ON t (c);", "SELECT 1"}
	if !slices.Equal(got, want) {
		t.Fatalf("split into %q, want %q", got, want)
	}
}
