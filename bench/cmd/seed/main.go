// Command seed writes the benchmark's users into a usersd SQLite file, fast enough for a million:
// sqlstore.Open creates the schema exactly as usersd would, then the rows go in through
// database/sql in large transactions. With -count it only prints how many users a file holds.
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"time"

	_ "modernc.org/sqlite" // the driver usersd uses

	"usersd/bench/internal/fixture"
	"usersd/store/sqlstore"
)

func main() {
	db := flag.String("db", "", "SQLite file to create (must not exist)")
	n := flag.Int("users", 1000, "number of users")
	summaryPath := flag.String("summary", "", "write a JSON summary (users, per-role counts) here")
	count := flag.Bool("count", false, "only print the number of users in -db")
	flag.Parse()
	if *db == "" {
		log.Fatal("seed: -db is required")
	}
	if *count {
		users, err := countUsers(*db)
		if err != nil {
			log.Fatalf("seed: %v", err)
		}
		fmt.Println(users)
		return
	}
	start := time.Now()
	summary, err := seed(context.Background(), *db, *n)
	if err != nil {
		log.Fatalf("seed: %v", err)
	}
	if *summaryPath != "" {
		out, _ := json.Marshal(summary)
		if err := os.WriteFile(*summaryPath, append(out, '\n'), 0o644); err != nil {
			log.Fatalf("seed: %v", err)
		}
	}
	fmt.Fprintf(os.Stderr, "seed: %d users in %s (%.1fs)\n", *n, *db, time.Since(start).Seconds())
}

func seed(ctx context.Context, path string, n int) (fixture.Summary, error) {
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		return fixture.Summary{}, fmt.Errorf("%s exists already; the seeder only fills new files", path)
	}
	// The schema, made by usersd's own code, so it is always the one usersd expects.
	st, err := sqlstore.Open(ctx, path)
	if err != nil {
		return fixture.Summary{}, err
	}
	if err := st.Close(); err != nil {
		return fixture.Summary{}, err
	}

	// One connection, no sync per commit: the file is a fixture, rebuilt if the machine crashes.
	db, err := sql.Open("sqlite", path+"?_pragma=synchronous(OFF)&_pragma=foreign_keys(1)")
	if err != nil {
		return fixture.Summary{}, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)

	summary := fixture.Summary{Users: n, Roles: map[string]int{}}
	const batch = 50_000
	var tx *sql.Tx
	var insert *sql.Stmt
	err = fixture.Each(n, func(u fixture.User) error {
		if tx == nil {
			if tx, err = db.BeginTx(ctx, nil); err != nil {
				return err
			}
			// Columns as in store/sqlstore/migrations/sqlite: times are Unix microseconds (UTC).
			if insert, err = tx.PrepareContext(ctx, `INSERT INTO users (id, name, role, created_at, updated_at, version) VALUES ($1, $2, $3, $4, $4, $5)`); err != nil {
				return err
			}
		}
		if _, err := insert.ExecContext(ctx, u.ID, u.Name, u.Role, u.CreatedAt.UnixMicro(), u.Version); err != nil {
			return fmt.Errorf("insert user %d: %w", u.ID, err)
		}
		summary.Roles[u.Role]++
		if int(u.ID)%batch == 0 || int(u.ID) == n {
			insert.Close()
			err := tx.Commit()
			tx, insert = nil, nil
			return err
		}
		return nil
	})
	if err != nil {
		return fixture.Summary{}, err
	}
	// Everything into the main file, so that the file can be copied alone. No ANALYZE: usersd never
	// runs it, so the query planner sees what it would see on a file usersd filled itself.
	for _, stmt := range []string{`PRAGMA wal_checkpoint(TRUNCATE)`} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return fixture.Summary{}, fmt.Errorf("%s: %w", stmt, err)
		}
	}
	return summary, nil
}

func countUsers(path string) (int64, error) {
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
