// SQLite specifics: the file's settings, and one writer connection beside a pool of readers.
package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"

	"modernc.org/sqlite" // registers the "sqlite" database/sql driver (pure Go, no cgo)
)

var sqliteDialect = dialect{
	name:          "sqlite",
	migrationsDir: "migrations/sqlite",
	// A read transaction in WAL mode reads one snapshot from its first read to its end.
	snapshot: sql.TxOptions{ReadOnly: true},
	// Nothing to take: the migrations run on the one writer connection, whose BEGIN IMMEDIATE
	// already makes processes on the same file take turns.
	lockMigrations: func(context.Context, *sql.Conn) (func() error, error) {
		return func() error { return nil }, nil
	},
	unavailable: func(err error) bool {
		code, ok := sqliteCode(err)
		return ok && (code&0xff == sqliteBusy || code&0xff == sqliteLocked) // held past the busy timeout
	},
	// One writer connection, so one batch at a time; and a write never waits for another's lock,
	// so it never meets one in a deadlock.
	committers: 1,
	retryable:  func(error) bool { return false },
	foreignKeyViolation: func(err error) bool {
		code, ok := sqliteCode(err)
		return ok && code == sqliteConstraintForeignKey
	},
	uniqueField:     sqliteUniqueField,
	idsIn:           `SELECT value FROM json_each($1)`,
	insertRows:      100,
	suffixOf:        `substr(%[1]s, -%[2]s)`,
	contains:        `instr(%[1]s, %[2]s) > 0`,
	anonymousInsert: true,
	// One row read instead of a scan of every user: triggers keep the counts (migration 0003). SQLite
	// has one writer anyway, so the rows every write updates cost no concurrency.
	// SQLite plans without statistics (usersd never runs ANALYZE), and then takes an equality on
	// role for more selective than a range of name keys: role=editor&namePrefix=ada would read every
	// editor. A search reads its matches, named here since the planner cannot weigh them.
	nameSearchHint: ` INDEXED BY users_name_key_role_delete_time`,
	// Without statistics, SQLite takes a range for a quarter of the rows, and then walks a sort
	// index and tests every row rather than read the range and sort it: a filter on a range of
	// ids, times or identities would read every user. As with the name search, a filter reads its
	// matches: likelihood() tells the planner so, and changes nothing else.
	selectiveRange:   `likelihood(%s, 0.001)`,
	labelDrivesPages: true,
	countUsers: func(role string, showDeleted bool) (string, []any) {
		if showDeleted {
			return `SELECT COALESCE((SELECT SUM(n) FROM user_counts WHERE scope IN ($1, $2)), 0)`,
				[]any{countScope(role), deletedScope(role)}
		}
		return `SELECT COALESCE((SELECT n FROM user_counts WHERE scope = $1), 0)`, []any{countScope(role)}
	},
	// The bucket counts' deltas (migration 0014), folded by the one process that writes the file.
	foldCounts:   foldBucketDeltas,
	bucketDeltas: `user_bucket_deltas WHERE true`,
	keptScope:    func(p string) string { return `COALESCE((SELECT n FROM user_counts WHERE scope = ` + p + `), 0)` },
	addScopes: `INSERT INTO user_counts (scope, n)
		SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each($1) WHERE true
		ON CONFLICT (scope) DO UPDATE SET n = user_counts.n + excluded.n`,
	addBuckets: `INSERT INTO user_count_buckets (kind, level, bucket, n)
		SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), json_extract(value, '$[2]'), json_extract(value, '$[3]')
		FROM json_each($1) WHERE true
		ON CONFLICT (kind, level, bucket) DO UPDATE SET n = user_count_buckets.n + excluded.n`,
}

// SQLite result codes (https://sqlite.org/rescode.html); extended codes keep the primary code in
// their low byte.
const (
	sqliteBusy                 = 5
	sqliteLocked               = 6
	sqliteConstraintForeignKey = 787
)

func sqliteCode(err error) (int, bool) {
	var sqliteErr *sqlite.Error
	if !errors.As(err, &sqliteErr) {
		return 0, false
	}
	return sqliteErr.Code(), true
}

// sqliteSettings apply to every connection. WAL lets readers run while one writer writes;
// synchronous=FULL syncs the WAL on every commit, so an acknowledged write survives a crash of the
// process and of the machine; the busy timeout covers the rare lock taken by a checkpoint.
var sqliteSettings = url.Values{
	"_journal_mode": {"WAL"},
	"_synchronous":  {"FULL"},
	"_foreign_keys": {"1"},
	"_busy_timeout": {"10000"},
}

// openSQLite opens a reader pool and a single writer connection on the file at path, creating its
// folder if needed. ":memory:" gives one connection for both, since each in-memory connection would
// otherwise be a database of its own.
func openSQLite(path string) (reader, writer, pinger *sql.DB, err error) {
	if path == "" {
		return nil, nil, nil, errors.New("empty SQLite path")
	}
	if path == ":memory:" {
		db, err := sql.Open("sqlite", ":memory:?"+sqliteSettings.Encode())
		if err != nil {
			return nil, nil, nil, err
		}
		db.SetMaxOpenConns(1)
		db.SetConnMaxLifetime(0)
		db.SetConnMaxIdleTime(0)
		return db, db, db, nil
	}
	// In a DSN, SQLite drivers read a '?' as the start of settings and "file:" as a URI; -db takes a
	// plain path (which sqliteURI escapes), so such a path is refused rather than guessed at, as is
	// what is meant as another kind of database.
	if err := CheckDSN(path); err != nil {
		return nil, nil, nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, nil, nil, fmt.Errorf("create folder for %s: %w", path, err)
	}

	// Created here, empty (which SQLite takes for an empty database), so that no connection needs to
	// create it: they open it with mode=rw, and one opened after the file was deleted fails instead
	// of starting an empty database at its path.
	created, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("create SQLite file: %w", err)
	}
	created.Close()

	writerSettings := cloneValues(sqliteSettings)
	// BEGIN IMMEDIATE takes the write lock at the start of a transaction, so a transaction that
	// reads before it writes can never fail to upgrade its lock.
	writerSettings.Set("_txlock", "immediate")
	// A write of a batch runs in a savepoint, whose undo SQLite keeps in a sub-journal: a
	// temporary file unless temporary storage is memory. It only ever undoes a write within its
	// transaction (the write-ahead log, synced at commit, is what survives a crash), so memory
	// loses nothing, and spares a create the writes and seeks of that file (docs/PERFORMANCE.md,
	// "Group commit").
	writerSettings.Add("_pragma", "temp_store(memory)")
	writerDSN, err := sqliteURI(path, writerSettings)
	if err != nil {
		return nil, nil, nil, err
	}
	writer, err = sql.Open("sqlite", writerDSN)
	if err != nil {
		return nil, nil, nil, err
	}
	writer.SetMaxOpenConns(1)
	writer.SetConnMaxLifetime(0)
	writer.SetConnMaxIdleTime(0)

	readerSettings := cloneValues(sqliteSettings)
	readerSettings.Set("_query_only", "1")
	readerDSN, err := sqliteURI(path, readerSettings)
	if err != nil {
		writer.Close()
		return nil, nil, nil, err
	}
	reader, err = sql.Open("sqlite", readerDSN)
	if err != nil {
		writer.Close()
		return nil, nil, nil, err
	}
	readers := max(4, runtime.GOMAXPROCS(0))
	reader.SetMaxOpenConns(readers)
	reader.SetMaxIdleConns(readers)

	// Open the writer first, so that the file exists and is in WAL mode before a reader opens it.
	if err := writer.Ping(); err != nil {
		writer.Close()
		reader.Close()
		return nil, nil, nil, fmt.Errorf("open SQLite file %s: %w", path, err)
	}
	if err := openAll(reader, readers); err != nil {
		writer.Close()
		reader.Close()
		return nil, nil, nil, fmt.Errorf("open SQLite readers on %s: %w", path, err)
	}
	// One more reader, for health checks alone (see Store.pinger).
	if pinger, err = sql.Open("sqlite", readerDSN); err == nil {
		pinger.SetMaxOpenConns(1)
		pinger.SetMaxIdleConns(1)
		err = openAll(pinger, 1)
	}
	if err != nil {
		writer.Close()
		reader.Close()
		if pinger != nil {
			pinger.Close()
		}
		return nil, nil, nil, fmt.Errorf("open SQLite health connection on %s: %w", path, err)
	}
	return reader, writer, pinger, nil
}

// openAll opens the pool's n connections now, where they stay (no lifetime, n kept idle), so that
// every connection is on the file that was at the path at start. A connection opened later, on a
// file that replaced it, would share the old file's write-ahead log and, taking itself for the
// last connection of its file when it closed, copy the old log into the new file.
func openAll(db *sql.DB, n int) error {
	conns := make([]*sql.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close() // back to the pool
		}
	}()
	for range n {
		c, err := db.Conn(context.Background()) // opens a connection: the pool has no idle one left
		if err != nil {
			return err
		}
		conns = append(conns, c)
	}
	return nil
}

// sqliteURI names the file at path as a SQLite URI that opens it read-write and never creates it
// (mode=rw), with the driver's settings: the driver hands a "file:" name to SQLite whole, so that
// SQLite applies mode, and still reads its own underscore settings from it.
func sqliteURI(path string, settings url.Values) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("SQLite path %q: %w", path, err)
	}
	query := cloneValues(settings)
	query.Set("mode", "rw")
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs), RawQuery: query.Encode()}).String(), nil
}

func cloneValues(v url.Values) url.Values {
	c := make(url.Values, len(v))
	for k, vs := range v {
		c[k] = append([]string(nil), vs...)
	}
	return c
}

// libpqKeyword matches the start of a libpq connection string ("host=db user=app dbname=users").
var libpqKeyword = regexp.MustCompile(`^\s*[a-z_]+\s*=`)

// CheckDSN reports whether Open can take dsn as a database: a postgres:// URL, ":memory:", or a
// plain SQLite file path. A program checks its settings with it before it does anything else.
func CheckDSN(dsn string) error {
	switch {
	case isPostgresURL(dsn), dsn == ":memory:":
		return nil
	case dsn == "":
		return errors.New("empty SQLite path")
	case strings.ContainsRune(dsn, '?') || strings.HasPrefix(dsn, "file:"):
		return fmt.Errorf("SQLite path %q: give a plain file path, without '?' or a file: prefix", dsn)
	}
	return notAPath(dsn)
}

// notAPath refuses a database name that is meant as something other than a SQLite file, so that it
// never silently becomes a new, empty file of that name: a libpq connection string, or a URL of
// another scheme.
func notAPath(dsn string) error {
	switch {
	case libpqKeyword.MatchString(dsn):
		return errors.New("the database looks like a libpq connection string (key=value ...): give PostgreSQL as a URL, " +
			"postgres://user@host:5432/dbname?sslmode=disable, or a SQLite file as a path")
	case strings.Contains(dsn, "://"):
		scheme, _, _ := strings.Cut(dsn, "://")
		return fmt.Errorf("the database is a %s:// URL: only postgres:// and postgresql:// URLs are databases here; anything else is a SQLite file path", scheme)
	}
	return nil
}
