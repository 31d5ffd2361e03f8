package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"usersd/bench/internal/procstat"
	"usersd/bench/internal/seeded"
)

// PostgreSQL for the harness: a fresh database for each write run, made from the seeded one, and
// the CPU that the server's processes spend on a run.

// adminExec runs one statement on the server's maintenance database (-postgres).
func (r *runner) adminExec(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, r.postgresURL)
	if err != nil {
		return fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, sql)
	return err
}

// freshPostgres makes a copy of the seeded database templateURL for one write run, and returns
// its URL and name. CREATE DATABASE ... TEMPLATE copies the files, which takes a moment at 1,000
// users; it fails while anyone is connected to the template, such as a usersd that a read-only run
// just stopped and whose connections the server has not closed yet, so it is tried for a while.
func (r *runner) freshPostgres(templateURL string) (dbURL, name string, err error) {
	template, err := seeded.DatabaseOf(templateURL)
	if err != nil {
		return "", "", err
	}
	r.freshCount++
	name = fmt.Sprintf("%srun_%d_%d", seeded.DatabasePrefix, os.Getpid(), r.freshCount)
	// A copy of ten million users takes minutes; the template may be in use for a minute at most.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	inUseUntil := time.Now().Add(time.Minute)
	for {
		err = r.adminExec(ctx, `CREATE DATABASE `+pgx.Identifier{name}.Sanitize()+` TEMPLATE `+pgx.Identifier{template}.Sanitize())
		var pgErr *pgconn.PgError
		if err == nil || !errors.As(err, &pgErr) || pgErr.Code != "55006" || time.Now().After(inUseUntil) { // 55006: object in use
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		return "", "", fmt.Errorf("copy %s for a write run: %w", template, err)
	}
	r.mu.Lock()
	r.freshDBs[name] = true
	r.mu.Unlock()
	dbURL, err = seeded.WithDatabase(r.postgresURL, name)
	return dbURL, name, err
}

// dropPostgres drops a database that freshPostgres made, closing any connection left to it.
func (r *runner) dropPostgres(name string) error {
	if !strings.HasPrefix(name, seeded.DatabasePrefix+"run_") {
		return fmt.Errorf("not dropping %s: the harness made no such database", name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.adminExec(ctx, `DROP DATABASE IF EXISTS `+pgx.Identifier{name}.Sanitize()+` WITH (FORCE)`); err != nil {
		return fmt.Errorf("drop %s: %w", name, err)
	}
	r.mu.Lock()
	delete(r.freshDBs, name)
	r.mu.Unlock()
	return nil
}

// postgresVersion is the server's version, for the report.
func (r *runner) postgresVersion() string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, r.postgresURL)
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	defer conn.Close(ctx)
	var v string
	if err := conn.QueryRow(ctx, `SHOW server_version`).Scan(&v); err != nil {
		return "unknown"
	}
	return v
}

// postgresTicks returns the CPU time (clock ticks, by pid) of the PostgreSQL processes that work for
// database db: its backends, whose titles name it, and the WAL writer, checkpointer and background
// writer, which its writes go through. They run on either CPU (the harness does not pin a server it
// did not start), so the report shows them beside usersd's own CPU.
func postgresTicks(db string) (map[int]int64, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	ticks := map[int]int64{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !strings.HasPrefix(string(cmdline), "postgres: ") {
			continue
		}
		// "postgres: 15/main: postgres usersd_bench_1m 127.0.0.1(51234) idle", "postgres: 15/main: walwriter"
		title := strings.Fields(strings.ReplaceAll(string(cmdline), "\x00", " "))
		ours := false
		for _, f := range title {
			if f == db || f == "walwriter" || f == "checkpointer" || f == "writer" {
				ours = true
			}
		}
		if !ours {
			continue
		}
		if t, err := procstat.CPUTicks(pid); err == nil {
			ticks[pid] = t
		}
	}
	return ticks, nil
}

// postgresSize is pg_database_size of database name.
func (r *runner) postgresSize(name string) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, r.postgresURL)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	var size int64
	err = conn.QueryRow(ctx, `SELECT pg_database_size($1)`, name).Scan(&size)
	return size, err
}
