package sqlstore_test

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"usersd/store"
	"usersd/store/sqlstore"
	"usersd/store/storetest"
)

func TestPostgresConformance(t *testing.T) {
	storetest.PostgresURL(t) // skip once here, not in every case, when there is no server
	t.Parallel()             // a store of its own: see open in sqlite_test.go
	storetest.Run(t, func(t *testing.T, now func() time.Time) store.Store {
		return open(t, storetest.PostgresSchema(t), sqlstore.WithClock(now))
	})
}

// TestPostgresReplicasMigrateOnce starts several stores on one empty schema at once, as replicas
// starting together would: the advisory lock lets one migrate while the others wait, then they all
// work on the same tables.
func TestPostgresReplicasMigrateOnce(t *testing.T) {
	dsn := storetest.PostgresSchema(t)
	const replicas = 5
	stores := make([]*sqlstore.Store, replicas)
	errs := make([]error, replicas)
	var wg sync.WaitGroup
	for i := range replicas {
		wg.Go(func() { stores[i], errs[i] = sqlstore.Open(context.Background(), dsn) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("replica %d: %v", i, err)
		}
		defer stores[i].Close()
	}
	u, err := stores[0].CreateUser(context.Background(), store.NewUser{Name: "shared"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range stores {
		if got, err := s.GetUser(context.Background(), u.ID); err != nil || got.Name != "shared" {
			t.Fatalf("replica %d reads %+v, %v", i, got, err)
		}
	}
	var applied int
	if err := storetest.OpenPostgres(t, dsn).QueryRow(`SELECT COUNT(*) FROM schema_migrations`).Scan(&applied); err != nil {
		t.Fatal(err)
	}
	files, err := os.ReadDir("migrations/postgres")
	if err != nil {
		t.Fatal(err)
	}
	if applied != len(files) {
		t.Fatalf("schema_migrations has %d rows, want one per migration (%d)", applied, len(files))
	}
}

// TestPostgresComparesTextBytewise: names and roles sort byte-wise on SQLite, so on PostgreSQL they
// must not follow the database's locale, whatever the server was created with.
func TestPostgresComparesTextBytewise(t *testing.T) {
	dsn := storetest.PostgresSchema(t)
	open(t, dsn).Close()
	rows, err := storetest.OpenPostgres(t, dsn).Query(`SELECT column_name, COALESCE(collation_name, '')
		FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name = 'users' AND column_name IN ('name', 'role')`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	seen := 0
	for rows.Next() {
		var column, collation string
		if err := rows.Scan(&column, &collation); err != nil {
			t.Fatal(err)
		}
		seen++
		if collation != "C" {
			t.Errorf("users.%s has collation %q, want C (byte-wise)", column, collation)
		}
	}
	if seen != 2 {
		t.Fatalf("found %d of the columns name and role", seen)
	}
}

// TestPostgresConformanceThroughPgBouncer runs the whole conformance suite through PgBouncer in
// transaction mode, with the migrations and LISTEN on the direct URL: the topology most PostgreSQL
// deployments run. pgx's default statement cache fails there (a prepared statement meets another
// client's on the same server connection: SQLSTATE 42P05); WithDirect makes the pool run without
// one.
func TestPostgresConformanceThroughPgBouncer(t *testing.T) {
	t.Parallel() // a store of its own: see open in sqlite_test.go
	bouncer := storetest.StartPgBouncer(t)
	storetest.Run(t, func(t *testing.T, now func() time.Time) store.Store {
		pooled, direct := bouncer.Database(t)
		return open(t, pooled, sqlstore.WithClock(now), sqlstore.WithDirect(direct))
	})
}

// TestPostgresSessionTimeoutsAreUnavailable: a write that waits for a lock past the session's
// lock_timeout, or past its statement_timeout, is refused as unavailable (a retry may succeed),
// never as a fault of the service. The URL's own values win over usersd's, which is how the test
// makes them short.
func TestPostgresSessionTimeoutsAreUnavailable(t *testing.T) {
	dsn := storetest.PostgresSchema(t)
	seed := open(t, dsn)
	defer seed.Close()
	u, err := seed.CreateUser(t.Context(), store.NewUser{Name: "locked", Role: "viewer"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	holder, err := storetest.OpenPostgres(t, dsn).BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback()
	if _, err := holder.ExecContext(t.Context(), `SELECT 1 FROM users WHERE id = $1 FOR UPDATE`, u.ID); err != nil {
		t.Fatal(err)
	}
	for _, limit := range []struct{ name, value string }{{"lock_timeout", "200"}, {"statement_timeout", "200"}} {
		s := open(t, storetest.WithURLParam(t, dsn, limit.name, limit.value))
		defer s.Close()
		name := "renamed"
		_, err := s.UpdateUser(t.Context(), u.ID, store.UserChanges{Name: &name}, nil)
		if !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("an update that waited for a lock past %s: %v; want store.ErrUnavailable", limit.name, err)
		}
	}
}

// TestPostgresThroughAPoolerWithoutDirectIsRefusedAtOnce: opened on PgBouncer's URL without
// WithDirect, the store sends its session limits at connection, which PgBouncer refuses. No retry
// mends that: the error says so (ErrStartupParameterRefused) and is not ErrUnavailable, which a
// caller waits out.
func TestPostgresThroughAPoolerWithoutDirectIsRefusedAtOnce(t *testing.T) {
	t.Parallel()
	bouncer := storetest.StartPgBouncer(t)
	pooled, _ := bouncer.Database(t)
	st, err := sqlstore.Open(t.Context(), pooled)
	if err == nil {
		st.Close()
		t.Fatal("a store opened through PgBouncer without WithDirect")
	}
	if !errors.Is(err, sqlstore.ErrStartupParameterRefused) || errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("opened through PgBouncer without WithDirect: %v; want ErrStartupParameterRefused, not unavailable", err)
	}
}

// TestPostgresAReadOnlyServerIsUnavailable: a write that reaches a server that only reads (SQLSTATE
// 25006: a primary that Patroni restarts as a standby, or a pooler that still points at the old
// primary after a failover) is unavailable, which a caller may retry once the primary is back, not
// a fault of the service; an idempotency key's release that meets it is retried.
func TestPostgresAReadOnlyServerIsUnavailable(t *testing.T) {
	t.Parallel()
	dsn := storetest.PostgresSchema(t)
	writable := open(t, dsn)
	defer writable.Close()
	// The migrations run on the direct URL, which writes; the requests' pool only reads.
	readOnly := open(t, storetest.WithURLParam(t, dsn, "default_transaction_read_only", "on"), sqlstore.WithDirect(dsn))
	defer readOnly.Close()
	if _, err := readOnly.CreateUser(t.Context(), store.NewUser{Name: "nowhere"}, nil); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("a create on a read-only server: %v, want unavailable", err)
	}
	key := store.RequestKey{Caller: "importer", Key: "read-only-release"}
	r, _, err := writable.BeginRequest(t.Context(), key, []byte("hash"))
	if err != nil {
		t.Fatal(err)
	}
	if err := readOnly.AbandonRequest(t.Context(), r); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("an idempotency key's release on a read-only server: %v, want unavailable (retried)", err)
	}
	if err := writable.AbandonRequest(t.Context(), r); err != nil {
		t.Fatalf("the release, retried where writes work: %v", err)
	}
}
