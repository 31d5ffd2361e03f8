// PostgreSQL specifics: one pool through pgx's database/sql driver, an advisory lock around the
// migrations, and which errors mean "the database cannot be reached right now".
package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"usersd/store"
)

// migrationLockKey names the advisory lock that replicas take to migrate one at a time; any
// constant works as long as every usersd uses the same one ("usersd" in ASCII).
const migrationLockKey = 0x757365727364

var postgresDialect = dialect{
	name:          "postgres",
	migrationsDir: "migrations/postgres",
	// READ COMMITTED, PostgreSQL's default, takes a new snapshot for every statement, so a page and
	// its count could disagree; REPEATABLE READ reads one snapshot for the whole transaction.
	snapshot: sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true},
	lockMigrations: func(ctx context.Context, conn *sql.Conn) (func() error, error) {
		if err := takeMigrationLock(ctx, conn); err != nil {
			return nil, err
		}
		return func() error {
			// A session lock outlives the migration: release it on this connection before the
			// pool hands the connection to anyone else.
			_, err := conn.ExecContext(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, int64(migrationLockKey))
			return err
		}, nil
	},
	unavailable: postgresUnavailable,
	// Several batches at once: a batch's statements are round trips to the server, and one
	// connection alone would make every write of the replica wait for them in turn.
	committers: postgresCommitters,
	// A deadlock: two batches (of two replicas) waiting for each other's rows. PostgreSQL fails one
	// statement of one of them; its write goes to its replica's next batch, after the other commits.
	retryable:           postgresDeadlock,
	foreignKeyViolation: func(err error) bool { return postgresCode(err) == "23503" },
	uniqueField:         postgresUniqueField,
	idsIn:               `SELECT value::integer FROM json_array_elements_text($1::json)`,
	insertRows:          500,
	suffixOf:            `right(%[1]s, %[2]s)`,
	contains:            `strpos(%[1]s, %[2]s) > 0`,
	forUpdate:           ` FOR UPDATE`,
	// Kept without a row that every write updates (migration 0007): writes append deltas, and
	// foldCountDeltas folds them into user_counts.
	countUsers: func(role string, showDeleted bool) (string, []any) {
		if showDeleted {
			return `SELECT COALESCE((SELECT SUM(n) FROM user_counts WHERE scope IN ($1, $2)), 0) +
				COALESCE((SELECT SUM(delta) FROM user_count_deltas WHERE scope IN ($1, $2)), 0)`,
				[]any{countScope(role), deletedScope(role)}
		}
		return `SELECT COALESCE((SELECT n FROM user_counts WHERE scope = $1), 0) +
			COALESCE((SELECT SUM(delta) FROM user_count_deltas WHERE scope = $1), 0)`, []any{countScope(role)}
	},
	foldCounts: foldCountDeltas,
	// The deltas of 'all' carry the user (migration 0021).
	bucketDeltas: `user_count_deltas WHERE scope = 'all'`,
	keptScope: func(p string) string {
		return `(COALESCE((SELECT n FROM user_counts WHERE scope = ` + p + `), 0) +
			COALESCE((SELECT SUM(delta) FROM user_count_deltas WHERE scope = ` + p + `), 0))`
	},
	addScopes: `INSERT INTO user_counts (scope, n)
		SELECT e->>0, (e->>1)::bigint FROM json_array_elements($1::json) AS e
		ON CONFLICT (scope) DO UPDATE SET n = user_counts.n + excluded.n`,
	addBuckets: `INSERT INTO user_count_buckets (kind, level, bucket, n)
		SELECT (e->>0)::smallint, (e->>1)::smallint, (e->>2)::bigint, (e->>3)::bigint FROM json_array_elements($1::json) AS e
		ON CONFLICT (kind, level, bucket) DO UPDATE SET n = user_count_buckets.n + excluded.n`,
	purgeLock: `SELECT pg_try_advisory_xact_lock($1)`,
}

// postgresCommitters is how many batches of writes a replica commits at once on PostgreSQL: a
// quarter of its pool, so that reads keep most of it.
const postgresCommitters = 4

// isPostgresURL reports whether dsn names a PostgreSQL database rather than a SQLite file.
func isPostgresURL(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// openPostgres opens a pool on the database that dsn names and checks that it answers. pooled says
// that dsn goes through a pooler in transaction mode: unless dsn chooses otherwise, statements
// then run without server-side prepared statements (see WithDirect). conns keeps the pool's
// connections for a wait at close.
func openPostgres(ctx context.Context, dsn string, pooled bool, conns *pgConns) (*sql.DB, error) {
	db, _, err := newPostgresPool(dsn, pooled, conns)
	if err != nil {
		return nil, err
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := db.PingContext(pingCtx); err != nil {
		db.Close()
		if startupParameterRefused(err) {
			return nil, fmt.Errorf("connect to PostgreSQL: %w: %w", ErrStartupParameterRefused, err)
		}
		if postgresUnavailable(err) || errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			// Not yet, perhaps: the server is down or starting. A caller may wait and try again.
			return nil, fmt.Errorf("connect to PostgreSQL: %w: %w", store.ErrUnavailable, err)
		}
		return nil, fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	return db, nil
}

// newPostgresPool returns a pool on the database that dsn names, connecting only when it is used,
// and the configuration that dsn parses to. conns keeps the pool's connections for a wait at close.
func newPostgresPool(dsn string, pooled bool, conns *pgConns) (*sql.DB, *pgx.ConnConfig, error) {
	config, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, nil, fmt.Errorf("PostgreSQL URL: %w", err) // pgx's message never repeats the password
	}
	if pooled && config.DefaultQueryExecMode == pgx.QueryExecModeCacheStatement { // pgx's default
		config.DefaultQueryExecMode = pgx.QueryExecModeExec
	}
	setSessionLimits(config, pooled)
	db := stdlib.OpenDB(*config, stdlib.OptionAfterConnect(conns.track))
	// A replica keeps a modest pool: many replicas share the server's connection limit.
	db.SetMaxOpenConns(16)
	db.SetMaxIdleConns(16)
	db.SetConnMaxIdleTime(5 * time.Minute)
	db.SetConnMaxLifetime(time.Hour) // lets a failover or a pooler's rebalancing reach every connection
	return db, config, nil
}

// ErrStartupParameterRefused is a connection refused for a session parameter sent at its start:
// what PgBouncer answers the session limits usersd sends on a direct connection. No retry mends it;
// the store must be told that it goes through a pooler (WithDirect).
var ErrStartupParameterRefused = errors.New("the server refused a startup parameter, as a pooler (PgBouncer) does")

// startupParameterRefused reports PgBouncer's refusal of a startup parameter it does not know
// ("unsupported startup parameter: statement_timeout"). It is a protocol violation (08P01), a
// class that postgresUnavailable counts as a connection that may work again: openPostgres asks
// this first, since no retry of the open mends it.
func startupParameterRefused(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "08P01" && strings.Contains(pgErr.Message, "unsupported startup parameter")
}

// postgresUnavailable reports whether err is a failure to reach the server (refused, reset, or the
// server shutting down or out of connections), as opposed to an error in the statement.
func postgresUnavailable(err error) bool {
	switch code := postgresCode(err); {
	case strings.HasPrefix(code, "08"): // connection exception
		return true
	case code == "57P01", code == "57P02", code == "57P03": // shutdown by admin, crash, cannot connect now
		return true
	case code == "53300": // too many connections
		return true
	case code == "55P03", code == "57014": // lock_timeout, statement_timeout (a cancel of ours is the context's)
		return true
	case code == "25P03": // the server ended a session idle in its transaction
		return true
	case code == "25006": // read-only: a primary restarting as a standby, or a pooler not yet moved to the new one
		return true
	case postgresDeadlock(err): // with another transaction, which a retry does not meet again
		return true
	case code != "":
		return false // the server answered: the statement (or a login it refused: a password, a database), not the connection, failed
	}
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) {
		return true
	}
	var netErr net.Error
	return errors.As(err, &netErr) || errors.Is(err, driver.ErrBadConn) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		pgconn.SafeToRetry(err)
}

// postgresDeadlock reports a statement that PostgreSQL failed to break a deadlock.
func postgresDeadlock(err error) bool { return postgresCode(err) == "40P01" }

// postgresCode returns the SQLSTATE of a server error, or "".
func postgresCode(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// migrationLockPoll is how often a process that waits for the migration lock asks for it again.
const migrationLockPoll = 100 * time.Millisecond

// takeMigrationLock takes the session lock of the migrations, asking again until it is free rather
// than waiting in pg_advisory_lock: a statement that waits is a transaction that stays open, and
// CREATE INDEX CONCURRENTLY, run by the holder of the lock outside a transaction, waits for every
// open transaction to end; the two would wait for each other until PostgreSQL broke the deadlock
// by failing the waiting process's start.
func takeMigrationLock(ctx context.Context, conn *sql.Conn) error {
	for {
		var taken bool
		if err := conn.QueryRowContext(ctx, `SELECT pg_try_advisory_lock($1)`, int64(migrationLockKey)).Scan(&taken); err != nil {
			return err
		}
		if taken {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(migrationLockPoll):
		}
	}
}
