// Package seeded is what the seeder (bench/cmd/seed) and the harness (bench/cmd/benchrun) agree on:
// how data set sizes are written, where each backend's seeded data lives, and what the seeder
// reports about a data set it made or found in its cache.
package seeded

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"usersd/bench/internal/fixture"
)

// Result is the seeder's -summary file: the fixture's summary (what the data holds, for exact
// checks) and where the data is.
type Result struct {
	fixture.Summary
	// DB is what usersd's -db takes: a SQLite file or a PostgreSQL URL.
	DB string `json:"db"`
	// Reused is true when the data came from the cache; SeedSeconds is then how long the seed that
	// made it took.
	Reused      bool    `json:"reused"`
	SeedSeconds float64 `json:"seedSeconds"`
}

// ParseSize reads a number of users: digits with an optional k (thousand) or m (million) suffix,
// as in 1k, 1m, 10m or 250000; underscores are allowed ("1_000_000").
func ParseSize(s string) (int, error) {
	text := strings.ToLower(strings.ReplaceAll(strings.TrimSpace(s), "_", ""))
	unit := 1
	switch {
	case strings.HasSuffix(text, "k"):
		text, unit = strings.TrimSuffix(text, "k"), 1_000
	case strings.HasSuffix(text, "m"):
		text, unit = strings.TrimSuffix(text, "m"), 1_000_000
	}
	n, err := strconv.Atoi(text)
	if err != nil || n <= 0 || n > (1<<31-1)/unit {
		return 0, fmt.Errorf("bad number of users %q: want digits with an optional k or m, such as 1k or 10m", s)
	}
	return n * unit, nil
}

// SizeName writes n as ParseSize reads it, as short as it is exact: 1k, 1m, 10m, 2500.
func SizeName(n int) string {
	switch {
	case n%1_000_000 == 0:
		return strconv.Itoa(n/1_000_000) + "m"
	case n%1_000 == 0:
		return strconv.Itoa(n/1_000) + "k"
	default:
		return strconv.Itoa(n)
	}
}

// DatabasePrefix starts the name of every PostgreSQL database that the seeder and the harness
// create, and they drop no other.
const DatabasePrefix = "usersd_bench_"

// PostgresDatabase is the name of the cached PostgreSQL database with n users.
func PostgresDatabase(n int) string { return DatabasePrefix + SizeName(n) }

// WithDatabase returns the PostgreSQL URL serverURL with its database replaced by name.
func WithDatabase(serverURL, name string) (string, error) {
	u, err := url.Parse(serverURL)
	if err != nil {
		return "", fmt.Errorf("PostgreSQL URL: %w", err)
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return "", fmt.Errorf("PostgreSQL URL %q: want a postgres:// URL", u.Redacted())
	}
	u.Path = "/" + name
	return u.String(), nil
}

// DatabaseOf returns the database name of a PostgreSQL URL.
func DatabaseOf(dbURL string) (string, error) {
	u, err := url.Parse(dbURL)
	if err != nil {
		return "", fmt.Errorf("PostgreSQL URL: %w", err)
	}
	return strings.TrimPrefix(u.Path, "/"), nil
}

// IsPostgres reports whether db names a PostgreSQL database rather than a SQLite file, as usersd
// tells them apart.
func IsPostgres(db string) bool {
	return strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://")
}
