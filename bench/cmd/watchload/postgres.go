package main

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"usersd/bench/internal/procstat"
)

// A PostgreSQL phase gets a fresh schema of its own in the database of -db, made here and dropped
// at the end; usersd reaches it through search_path, and names its connections with
// application_name so that their backends' CPU can be counted.

const schemaPrefix = "watchload_"

// pgExec runs one statement on the database of dbURL.
func pgExec(ctx context.Context, dbURL, sql string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, sql)
	return err
}

// freshSchema makes the schema name and returns the URL usersd is to be given.
func freshSchema(ctx context.Context, dbURL, name string) (string, error) {
	if err := pgExec(ctx, dbURL, `CREATE SCHEMA `+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", fmt.Errorf("create schema %s: %w", name, err)
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		return "", err
	}
	q := u.Query()
	q.Set("search_path", name)
	q.Set("application_name", name)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// dropSchema drops a schema that freshSchema made.
func dropSchema(dbURL, name string) error {
	if !strings.HasPrefix(name, schemaPrefix) {
		return fmt.Errorf("not dropping schema %s: watchload made no such schema", name)
	}
	return pgExec(context.Background(), dbURL, `DROP SCHEMA IF EXISTS `+pgx.Identifier{name}.Sanitize()+` CASCADE`)
}

// backendTicks is the CPU time (clock ticks, by pid) of the PostgreSQL backends whose
// application_name is name: usersd's connections to its schema. A backend that ended before the
// reading is not counted, so this is a lower bound when usersd's pool replaces connections.
func backendTicks(ctx context.Context, dbURL, name string) (map[int]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE application_name = $1`, name)
	if err != nil {
		return nil, err
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil, err
	}
	ticks := map[int]int64{}
	for _, pid := range pids {
		if t, err := procstat.CPUTicks(int(pid)); err == nil {
			ticks[int(pid)] = t
		}
	}
	return ticks, nil
}
