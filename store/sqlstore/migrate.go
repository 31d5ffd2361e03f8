// Schema migrations: numbered SQL files embedded in the binary, applied in order, each once.
package sqlstore

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"usersd/store"
)

//go:embed migrations
var migrationFiles embed.FS

type migration struct {
	version int
	name    string
	sql     string
	// then is what SQL cannot do, run after sql in the same transaction; nil for most migrations.
	then func(ctx context.Context, tx *sql.Tx) error
	// thenOutside is then for a migration that runs outside a transaction: it gets the migration's
	// connection, and runs its own short transactions, after the file's statements.
	thenOutside func(ctx context.Context, conn *sql.Conn) error
	// outsideTransaction marks a file whose first line is noTransactionMarker: its statements run
	// one by one outside any transaction (see applyOutsideTransaction).
	outsideTransaction bool
}

// noTransactionMarker, as the first line of a migration file, makes it run outside a transaction:
// for what PostgreSQL refuses in one, such as CREATE INDEX CONCURRENTLY.
const noTransactionMarker = "-- usersd:no-transaction"

// goSteps are the Go parts of migrations, by the file name without its number, so that the same
// step serves each backend's file of that name.
var goSteps = map[string]func(ctx context.Context, tx *sql.Tx) error{
	"name_key.sql": fillNameKeys,
}

// outsideSteps are goSteps for the migrations that run outside a transaction.
var outsideSteps = map[string]func(ctx context.Context, conn *sql.Conn) error{
	"filters_indexes.sql": backfillLabels,
}

// migrations lists the dialect's migration files in the order they apply.
func (d *dialect) migrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFiles, d.migrationsDir)
	if err != nil {
		return nil, err
	}
	var ms []migration
	for _, e := range entries {
		number, _, ok := strings.Cut(e.Name(), "_")
		version, err := strconv.Atoi(number)
		if !ok || err != nil || !strings.HasSuffix(e.Name(), ".sql") {
			return nil, fmt.Errorf("migration file %s is not named NNNN_description.sql", e.Name())
		}
		body, err := fs.ReadFile(migrationFiles, path.Join(d.migrationsDir, e.Name()))
		if err != nil {
			return nil, err
		}
		_, description, _ := strings.Cut(e.Name(), "_")
		m := migration{version: version, name: e.Name(), sql: string(body), then: goSteps[description]}
		if firstLine, _, _ := strings.Cut(m.sql, "\n"); strings.TrimSpace(firstLine) == noTransactionMarker {
			if m.then != nil {
				return nil, fmt.Errorf("migration %s runs outside a transaction, so it cannot have a Go step", e.Name())
			}
			m.outsideTransaction, m.thenOutside = true, outsideSteps[description]
		} else if outsideSteps[description] != nil {
			return nil, fmt.Errorf("migration %s runs in a transaction, so it cannot have a Go step of its own transactions", e.Name())
		}
		ms = append(ms, m)
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	for i := 1; i < len(ms); i++ {
		if ms[i].version == ms[i-1].version {
			return nil, fmt.Errorf("migrations %s and %s share a number", ms[i-1].name, ms[i].name)
		}
	}
	return ms, nil
}

// migrate applies every migration that the database has not seen yet. Each runs in its own
// transaction together with the row that records it, so a failed migration leaves nothing behind
// and the data before it stays as it was. Processes that start at once (replicas) take turns under
// the dialect's migration lock, so only the first applies a migration and the others see it applied.
func (s *Store) migrate(ctx context.Context, db *sql.DB) (err error) {
	ms, err := s.dialect.migrations()
	if err != nil {
		return err
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	unlock, err := s.dialect.lockMigrations(ctx, conn)
	if err != nil {
		return fmt.Errorf("take the migration lock: %w", err)
	}
	defer func() {
		if unlockErr := unlock(); unlockErr != nil {
			err = errors.Join(err, fmt.Errorf("release the migration lock: %w", unlockErr))
		}
	}()

	if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY,
		name TEXT NOT NULL,
		applied_at BIGINT NOT NULL
	)`); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	for _, m := range ms {
		if err := s.apply(ctx, conn, m); err != nil {
			return fmt.Errorf("%s: %w", m.name, err)
		}
	}
	return nil
}

// migrateSchema migrates the store's database: on the writer, or, behind a pooler, on a connection
// of its own to the direct URL, since the migration lock is held by a session, which a pooler in
// transaction mode would hand to another client between statements.
func (s *Store) migrateSchema(ctx context.Context) error {
	if s.direct == "" {
		return s.migrate(ctx, s.writer)
	}
	db, err := openPostgres(ctx, s.direct, false, s.pgConns)
	if err != nil {
		return fmt.Errorf("the direct URL: %w", err)
	}
	defer db.Close()
	return s.migrate(ctx, db)
}

func (s *Store) apply(ctx context.Context, conn *sql.Conn, m migration) error {
	if m.outsideTransaction {
		return s.applyOutsideTransaction(ctx, conn, m)
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var applied bool
	err = tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version = $1)`, m.version).Scan(&applied)
	if err != nil || applied {
		return err
	}
	if s.dialect == &postgresDialect {
		// A migration may build an index on a large table, or wait for a replica's write to end:
		// the session's statement and lock timeouts are for the requests' statements.
		if _, err := tx.ExecContext(ctx, `SET LOCAL statement_timeout = 0; SET LOCAL lock_timeout = 0`); err != nil {
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, m.sql); err != nil {
		return err
	}
	if m.then != nil {
		if err := m.then(ctx, tx); err != nil {
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)`,
		m.version, m.name, micros(s.now())); err != nil {
		return err
	}
	return tx.Commit()
}

// fillNameKeys sets the search key of every user that has none yet (store.NameKey), in batches of
// one statement each, walking the ids in order, so that an existing database gains the name search on upgrade. Every name is
// required and not blank, so an empty key means one that was never filled.
func fillNameKeys(ctx context.Context, tx *sql.Tx) error {
	const batch = 500
	type idName struct {
		id   int32
		name string
	}
	for after := int32(0); ; {
		rows, err := tx.QueryContext(ctx, `SELECT id, name FROM users WHERE id > $1 AND name_key = '' ORDER BY id LIMIT $2`, after, batch)
		users, err := rowsOf(rows, err, func(row scanner) (u idName, err error) { return u, row.Scan(&u.id, &u.name) })
		if err != nil || len(users) == 0 {
			return err
		}
		after = users[len(users)-1].id
		// UPDATE users SET name_key = CASE id WHEN $1 THEN $2 ... END WHERE id IN ($1, ...): one
		// statement per batch, in SQL that both backends take.
		var cases, ids []string
		var a args
		for _, u := range users {
			id := a.add(u.id)
			cases, ids = append(cases, "WHEN "+id+" THEN "+a.add(store.NameKey(u.name))), append(ids, id)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE users SET name_key = CASE id `+strings.Join(cases, " ")+` END WHERE id IN (`+strings.Join(ids, ", ")+`)`, a...); err != nil {
			return fmt.Errorf("fill name keys: %w", err)
		}
	}
}

// applyOutsideTransaction runs a migration marked noTransactionMarker: each statement alone, in
// the order of the file, and then the row that records it. A process that stops half way leaves
// it unrecorded, and the next start runs the whole file again, so such a file must be safe to run
// twice (IF EXISTS, IF NOT EXISTS). The migration lock, held by the session, still keeps the other
// processes out.
func (s *Store) applyOutsideTransaction(ctx context.Context, conn *sql.Conn, m migration) (err error) {
	var applied bool
	err = conn.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version = $1)`, m.version).Scan(&applied)
	if err != nil || applied {
		return err
	}
	if s.dialect == &postgresDialect {
		// As in apply, but for the session, until the migration ends: no transaction to scope it.
		if _, err := conn.ExecContext(ctx, `SET statement_timeout = 0`); err != nil {
			return err
		}
		if _, err := conn.ExecContext(ctx, `SET lock_timeout = 0`); err != nil {
			return err
		}
		defer func() {
			if _, resetErr := conn.ExecContext(context.WithoutCancel(ctx), `RESET statement_timeout`); resetErr != nil {
				err = errors.Join(err, resetErr)
			}
			if _, resetErr := conn.ExecContext(context.WithoutCancel(ctx), `RESET lock_timeout`); resetErr != nil {
				err = errors.Join(err, resetErr)
			}
		}()
	}
	for _, statement := range migrationStatements(m.sql) {
		// One statement per call: several in one call would run as one implicit transaction.
		if _, err := conn.ExecContext(ctx, statement); err != nil {
			return fmt.Errorf("%q: %w", statement, err)
		}
	}
	if m.thenOutside != nil {
		if err := m.thenOutside(ctx, conn); err != nil {
			return err
		}
	}
	_, err = conn.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)`,
		m.version, m.name, micros(s.now()))
	return err
}

// migrationStatements splits a migration that runs outside a transaction into its statements: it
// ends each at a semicolon that ends a line, and drops the comments between them. Such files hold
// plain statements only (no function bodies, whose semicolons would split them).
func migrationStatements(text string) []string {
	var statements []string
	var current strings.Builder
	for line := range strings.SplitSeq(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "--") {
			continue
		}
		current.WriteString(line)
		current.WriteString("\n")
		if strings.HasSuffix(trimmed, ";") {
			statements = append(statements, strings.TrimSpace(current.String()))
			current.Reset()
		}
	}
	if rest := strings.TrimSpace(current.String()); rest != "" {
		statements = append(statements, rest)
	}
	return statements
}

// backfillBatch is how many users one statement of backfillLabels copies the labels of, and
// backfillRetryPause how long it waits before it runs a batch again that lost a deadlock.
const (
	backfillBatch      = 1000
	backfillRetryPause = 50 * time.Millisecond
)

// backfillLabels copies the labels of the users there were before the label triggers (postgres
// 0019) into user_labels: in batches of users by id, one statement each, committed on its own, so
// that it locks only the batch's rows, for as long as one statement. Each batch locks its rows
// before it reads them: a write of a user's labels that is under way ends first, and the batch then
// reads what it wrote, whose rows the trigger already made (ON CONFLICT leaves them); a write that
// comes after waits, and its trigger replaces the batch's rows. Run again, it copies nothing twice.
func backfillLabels(ctx context.Context, conn *sql.Conn) error {
	for after := int64(0); ; {
		var last sql.NullInt64
		err := conn.QueryRowContext(ctx, `
			WITH batch AS (
				SELECT id, labels FROM users WHERE id > $1 ORDER BY id LIMIT $2 FOR NO KEY UPDATE
			), copied AS (
				INSERT INTO user_labels (user_id, key, value)
				SELECT b.id, j.key, j.value FROM batch AS b, jsonb_each_text(b.labels::jsonb) AS j WHERE b.labels <> '{}'
				ON CONFLICT (user_id, key) DO NOTHING
			)
			SELECT MAX(id) FROM batch`, after, backfillBatch).Scan(&last)
		if postgresDeadlock(err) && ctx.Err() == nil {
			// A batch locks its users in id order and a write batch in its own order: PostgreSQL
			// breaks the deadlock by failing one of them, and the batch, which wrote nothing, is
			// run again rather than failing the migration (which would start over at id 0).
			time.Sleep(backfillRetryPause)
			continue
		}
		if err != nil {
			return fmt.Errorf("copy the labels of the users after %d: %w", after, err)
		}
		if !last.Valid {
			return nil
		}
		after = last.Int64
	}
}
