// The seed cache: seeding ten million users takes minutes, so seeded data is kept and reused until
// usersd's migrations change. A SQLite file is kept in a folder, a PostgreSQL database on the
// server, each keyed by the number of users and a hash of the backend's migration files.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"usersd/bench/internal/fixture"
	"usersd/bench/internal/seeded"
)

// seedFormat changes whenever what the seeder writes changes without a migration changing (the
// fixture's users, a column the seeder fills), so that the cache is seeded again.
const seedFormat = "seed 4: fixture PCG(2026, 11), name_key, exact user_counts, unique user names, emails and external ids, active, team labels"

// schemaKey hashes the backend's migration files (names and statements) and seedFormat. Lines that
// are only a comment are left out: rewording a migration's comments must not cost a ten-million
// seed, while any change to a statement (even inside a function body) seeds again.
func schemaKey(migrations, backend string) (string, error) {
	if migrations == "" {
		var err error
		if migrations, err = findMigrations(); err != nil {
			return "", err
		}
	}
	dir := filepath.Join(migrations, backend)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("read the migrations: %w", err)
	}
	h := sha256.New()
	h.Write([]byte(seedFormat + "\x00"))
	files := 0
	for _, e := range entries { // sorted by name
		if e.IsDir() || filepath.Ext(e.Name()) != ".sql" {
			continue
		}
		body, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return "", err
		}
		var statements []string
		for line := range strings.Lines(string(body)) {
			if trimmed := strings.TrimSpace(line); trimmed != "" && !strings.HasPrefix(trimmed, "--") {
				statements = append(statements, line)
			}
		}
		text := strings.Join(statements, "")
		fmt.Fprintf(h, "%s\x00%d\x00%s", e.Name(), len(text), text)
		files++
	}
	if files == 0 {
		return "", fmt.Errorf("no migration files in %s", dir)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// findMigrations looks for store/sqlstore/migrations in the working folder and the folders above
// it, so that the seeder finds them when run from anywhere in the repository.
func findMigrations() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		candidate := filepath.Join(dir, "store", "sqlstore", "migrations")
		if info, err := os.Stat(candidate); err == nil && info.IsDir() {
			return candidate, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("cannot find store/sqlstore/migrations above the working folder: give -migrations")
		}
		dir = parent
	}
}

// sidecar is kept next to a cached SQLite file: how long its seed took.
type sidecar struct {
	SeedSeconds float64 `json:"seedSeconds"`
}

// cachedSQLite returns the cached SQLite file with n users made by the migrations that key names,
// seeding it first if it is missing. The file is seeded under a temporary name and renamed when
// complete, so an interrupted seed never looks cached; older files of the same size are removed.
func cachedSQLite(ctx context.Context, dir, key string, n int, reseed bool) (seeded.Result, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return seeded.Result{}, err
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return seeded.Result{}, err
	}
	prefix := "users-" + seeded.SizeName(n) + "-sqlite-"
	path := filepath.Join(dir, prefix+key+".db")
	res := seeded.Result{DB: path}
	if _, err := os.Stat(path); err == nil && !reseed {
		res.Reused = true
		if b, err := os.ReadFile(path + ".json"); err == nil {
			var s sidecar
			if json.Unmarshal(b, &s) == nil {
				res.SeedSeconds = s.SeedSeconds
			}
		}
		res.Summary = fixture.Summarize(n)
		return res, nil
	}

	removeAbandoned(dir)
	tmp := filepath.Join(dir, ".seeding-"+strconv.Itoa(os.Getpid())+"-"+filepath.Base(path))
	removeSQLite(tmp)
	start := time.Now()
	summary, err := seedSQLite(ctx, tmp, n)
	if err != nil {
		removeSQLite(tmp)
		return seeded.Result{}, err
	}
	res.Summary, res.SeedSeconds = summary, time.Since(start).Seconds()
	side, _ := json.Marshal(sidecar{SeedSeconds: res.SeedSeconds})
	if err := os.WriteFile(path+".json", side, 0o644); err != nil {
		return seeded.Result{}, err
	}
	removeSQLite(path)
	if err := os.Rename(tmp, path); err != nil {
		removeSQLite(tmp)
		return seeded.Result{}, fmt.Errorf("keep the seeded file: %w", err)
	}
	// Files of this size made by other migrations are of no more use (a ten-million file is
	// gigabytes).
	old, _ := filepath.Glob(filepath.Join(dir, prefix+"*.db"))
	for _, f := range old {
		if f != path {
			log.Printf("removing %s, seeded by other migrations", filepath.Base(f))
			removeSQLite(f)
			os.Remove(f + ".json")
		}
	}
	return res, nil
}

// removeAbandoned removes the partial files of seeds that were interrupted (their seeder no longer
// runs): at ten million users they take gigabytes.
func removeAbandoned(dir string) {
	partial, _ := filepath.Glob(filepath.Join(dir, ".seeding-*.db"))
	for _, f := range partial {
		pid, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(f), ".seeding-"), "-")
		if _, err := os.Stat("/proc/" + pid); errors.Is(err, os.ErrNotExist) {
			log.Printf("removing %s, left by an interrupted seed", filepath.Base(f))
			removeSQLite(f)
		}
	}
}

// removeSQLite removes a SQLite file with its WAL and shared-memory files.
func removeSQLite(path string) {
	for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
		os.Remove(path + suffix)
	}
}

// markerTable, in a cached PostgreSQL database, says which migrations and how many users it was
// seeded with. It is written last, so a database without it was never completely seeded.
const markerTable = "usersd_bench_seed"

// cachedPostgres returns the URL of the database usersd_bench_<size> on the server that serverURL
// names, seeding it first if it is missing or was seeded by other migrations. Seeds of one size take
// turns under an advisory lock, so two runs never seed the same database at once.
func cachedPostgres(ctx context.Context, serverURL, key string, n int, reseed bool) (seeded.Result, error) {
	name := seeded.PostgresDatabase(n)
	dbURL, err := seeded.WithDatabase(serverURL, name)
	if err != nil {
		return seeded.Result{}, err
	}
	res := seeded.Result{DB: dbURL}
	server, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		return seeded.Result{}, fmt.Errorf("connect to %s: %w", redact(serverURL), err)
	}
	defer server.Close(context.WithoutCancel(ctx))
	lockKey := `hashtext('` + name + `')`
	if _, err := server.Exec(ctx, `SELECT pg_advisory_lock(`+lockKey+`)`); err != nil {
		return seeded.Result{}, fmt.Errorf("wait for other seeds of %s: %w", name, err)
	}
	defer server.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(`+lockKey+`)`)

	var exists bool
	if err := server.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return seeded.Result{}, err
	}
	if exists && !reseed {
		seconds, ok, err := readMarker(ctx, dbURL, key, n)
		if err != nil {
			return seeded.Result{}, err
		}
		if ok {
			res.Reused, res.SeedSeconds, res.Summary = true, seconds, fixture.Summarize(n)
			return res, nil
		}
		log.Printf("%s was seeded by other migrations, or not completely: seeding it again", name)
	}
	if exists {
		// Only databases named by seeded.PostgresDatabase get here: the seeder's own.
		if _, err := server.Exec(ctx, `DROP DATABASE `+pgx.Identifier{name}.Sanitize()+` WITH (FORCE)`); err != nil {
			return seeded.Result{}, fmt.Errorf("drop %s: %w", name, err)
		}
	}
	if _, err := server.Exec(ctx, `CREATE DATABASE `+pgx.Identifier{name}.Sanitize()); err != nil {
		return seeded.Result{}, fmt.Errorf("create %s: %w", name, err)
	}
	start := time.Now()
	if res.Summary, err = seedPostgres(ctx, dbURL, n); err != nil {
		return seeded.Result{}, err
	}
	res.SeedSeconds = time.Since(start).Seconds()
	if err := writeMarker(ctx, dbURL, key, n, res.SeedSeconds); err != nil {
		return seeded.Result{}, err
	}
	return res, nil
}

// readMarker reports whether the database at dbURL was completely seeded with n users by the
// migrations that key names, and how long that seed took.
func readMarker(ctx context.Context, dbURL, key string, n int) (seconds float64, ok bool, err error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return 0, false, fmt.Errorf("connect to %s: %w", redact(dbURL), err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var present bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, markerTable).Scan(&present); err != nil || !present {
		return 0, false, err
	}
	var gotKey string
	var users int64
	err = conn.QueryRow(ctx, `SELECT key, users, seed_seconds FROM `+markerTable).Scan(&gotKey, &users, &seconds)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	return seconds, err == nil && gotKey == key && users == int64(n), err
}

func writeMarker(ctx context.Context, dbURL, key string, n int, seconds float64) error {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", redact(dbURL), err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, `CREATE TABLE `+markerTable+` (key TEXT NOT NULL, users BIGINT NOT NULL,
		seed_seconds DOUBLE PRECISION NOT NULL, seeded_at TIMESTAMPTZ NOT NULL DEFAULT now())`)
	if err == nil {
		_, err = conn.Exec(ctx, `INSERT INTO `+markerTable+` (key, users, seed_seconds) VALUES ($1, $2, $3)`, key, n, seconds)
	}
	if err != nil {
		return fmt.Errorf("mark %s as seeded: %w", redact(dbURL), err)
	}
	return nil
}
