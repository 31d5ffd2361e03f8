// Seeding a SQLite file: usersd's schema, then the users in large transactions with the users
// indexes and triggers out of the way, then the indexes and the counts made once.
package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	_ "modernc.org/sqlite" // the driver usersd uses

	"usersd/bench/internal/fixture"
	"usersd/store"
	"usersd/store/sqlstore"
)

// sqliteRowsPerInsert is how many users one INSERT statement carries: one statement per user spends
// most of its time in database/sql and the driver rather than in SQLite. 14 columns x 200 rows stays
// far below SQLite's limit of 32,766 parameters.
const sqliteRowsPerInsert = 200

// sqliteRowsPerTx is how many users one transaction carries.
const sqliteRowsPerTx = 500_000

// schemaObject is an index or trigger of the users table, with the statement that makes it again.
type schemaObject struct{ kind, name, sql string }

func seedSQLite(ctx context.Context, path string, n int) (fixture.Summary, error) {
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		return fixture.Summary{}, fmt.Errorf("%s exists already; the seeder only fills new files", path)
	}
	// The schema, made by usersd's own code, so it is always the one usersd expects.
	st, err := sqlstore.Open(ctx, path)
	if err != nil {
		return fixture.Summary{}, fmt.Errorf("create the schema in %s: %w", path, err)
	}
	if err := st.Close(); err != nil {
		return fixture.Summary{}, err
	}

	// One connection, no sync: the file is a fixture, made again if the machine crashes. A larger
	// page cache (256 MiB) lets each index build (a sort of every user) keep more of its sort in
	// memory at ten million users.
	db, err := sql.Open("sqlite", path+"?_pragma=synchronous(OFF)&_pragma=foreign_keys(1)&_pragma=cache_size(-262144)")
	if err != nil {
		return fixture.Summary{}, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)

	start := time.Now()
	// Without the indexes, every row is appended to the table alone; building each index once from
	// sorted keys is much faster than growing eleven B-trees by random inserts. Without the count
	// triggers, each row skips two upserts; usersd recounts the users once at the end.
	saved, err := sqliteUsersObjects(ctx, db)
	if err != nil {
		return fixture.Summary{}, err
	}
	for _, o := range saved {
		if _, err := db.ExecContext(ctx, `DROP `+o.kind+` `+quoteIdent(o.name)); err != nil {
			return fixture.Summary{}, fmt.Errorf("drop %s %s: %w", o.kind, o.name, err)
		}
	}
	summary, err := insertSQLiteUsers(ctx, db, n)
	if err != nil {
		return fixture.Summary{}, err
	}
	phase("insert", start)

	// The label side table that filters search, which the dropped label triggers would have kept.
	t := time.Now()
	if _, err := db.ExecContext(ctx, `INSERT INTO user_labels (user_id, key, value)
		SELECT u.id, j.key, j.value FROM users AS u, json_each(u.labels) AS j WHERE u.labels <> '{}'`); err != nil {
		return fixture.Summary{}, fmt.Errorf("fill user_labels: %w", err)
	}
	phase("user_labels", t)

	for _, o := range saved {
		t := time.Now()
		if _, err := db.ExecContext(ctx, o.sql); err != nil {
			return fixture.Summary{}, fmt.Errorf("create %s %s again: %w", o.kind, o.name, err)
		}
		if o.kind == "index" {
			phase("index "+o.name, t)
		}
	}

	t = time.Now()
	kept, err := recountUsers(ctx, path)
	if err != nil {
		return fixture.Summary{}, err
	}
	if err := checkCounts(kept, summary); err != nil {
		return fixture.Summary{}, err
	}
	phase("user_counts", t)

	// Everything into the main file, so that the file can be copied alone. No ANALYZE: usersd never
	// runs it, so the query planner sees what it would see on a file usersd filled itself.
	t = time.Now()
	if _, err := db.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		return fixture.Summary{}, fmt.Errorf("checkpoint: %w", err)
	}
	phase("checkpoint", t)
	return summary, db.Close()
}

// sqliteUsersObjects returns the indexes and triggers of the users table as sqlite_master keeps
// them: the exact statements that made them, so that they come back as the migrations made them.
// Indexes that SQLite makes itself (for a primary key or UNIQUE) have no statement and stay.
func sqliteUsersObjects(ctx context.Context, db *sql.DB) ([]schemaObject, error) {
	rows, err := db.QueryContext(ctx, `SELECT type, name, sql FROM sqlite_master
		WHERE tbl_name = 'users' AND type IN ('index', 'trigger') AND sql IS NOT NULL ORDER BY type, name`)
	if err != nil {
		return nil, fmt.Errorf("read the users indexes and triggers: %w", err)
	}
	defer rows.Close()
	var objects []schemaObject
	for rows.Next() {
		var o schemaObject
		if err := rows.Scan(&o.kind, &o.name, &o.sql); err != nil {
			return nil, err
		}
		objects = append(objects, o)
	}
	return objects, rows.Err()
}

// insertSQLiteUsers appends users 1..n, sqliteRowsPerInsert a statement, sqliteRowsPerTx a
// transaction, with their name search keys and identities.
func insertSQLiteUsers(ctx context.Context, db *sql.DB, n int) (fixture.Summary, error) {
	summary := fixture.NewSummary()
	// Columns as in store/sqlstore/migrations/sqlite: times are Unix microseconds (UTC).
	names := append([]string{"id", "name", "name_key", "role", "created_at", "updated_at", "version"}, identityColumns...)
	columns := len(names)
	row := "(" + strings.TrimSuffix(strings.Repeat("?, ", columns), ", ") + ")"
	statement := func(rows int) string {
		var b strings.Builder
		b.WriteString(`INSERT INTO users (` + strings.Join(names, ", ") + `) VALUES `)
		for i := range rows {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(row)
		}
		return b.String()
	}
	var tx *sql.Tx
	var full *sql.Stmt
	args := make([]any, 0, columns*sqliteRowsPerInsert)
	flush := func() error {
		if len(args) == 0 {
			return nil
		}
		var err error
		if len(args) == cap(args) {
			_, err = full.ExecContext(ctx, args...)
		} else {
			_, err = tx.ExecContext(ctx, statement(len(args)/columns), args...)
		}
		if err != nil {
			return fmt.Errorf("insert users up to %d: %w", args[len(args)-columns], err)
		}
		args = args[:0]
		return nil
	}
	for u := range fixture.Users(n) {
		if tx == nil {
			var err error
			if tx, err = db.BeginTx(ctx, nil); err != nil {
				return summary, err
			}
			if full, err = tx.PrepareContext(ctx, statement(sqliteRowsPerInsert)); err != nil {
				return summary, err
			}
		}
		summary.Add(u)
		micros := u.CreatedAt.UnixMicro()
		args = append(args, u.ID, u.Name, store.NameKey(u.Name), u.Role, micros, micros, u.Version)
		args = append(args, seedIdentity(u, sqliteBool)...)
		if len(args) == cap(args) {
			if err := flush(); err != nil {
				return summary, err
			}
		}
		if int(u.ID)%sqliteRowsPerTx == 0 || int(u.ID) == n {
			if err := flush(); err != nil {
				return summary, err
			}
			full.Close()
			if err := tx.Commit(); err != nil {
				return summary, fmt.Errorf("commit users up to %d: %w", u.ID, err)
			}
			tx, full = nil, nil
		}
	}
	return summary, nil
}

// sqliteBool is how SQLite stores a boolean: 1 or 0.
func sqliteBool(b bool) any {
	if b {
		return 1
	}
	return 0
}

// countSQLite counts the users of a usersd SQLite file, opening it as SQLite does after a crash
// (replaying the WAL).
func countSQLite(path string) (int64, error) {
	if _, err := os.Stat(path); err != nil {
		return 0, err
	}
	db, err := sql.Open("sqlite", path+"?_pragma=query_only(1)")
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var users int64
	err = db.QueryRow(`SELECT COUNT(*) FROM users`).Scan(&users)
	return users, err
}

// quoteIdent quotes an SQL identifier, for the names read back from the schema.
func quoteIdent(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }
