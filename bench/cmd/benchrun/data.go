package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"usersd/bench/internal/fixture"
	"usersd/bench/internal/seeded"
)

// The data sets usersd runs on: seeded once per backend and size through the seeder's cache, shared
// by the read-only runs, and copied afresh for each write run.

// dataKey names a data set.
type dataKey struct {
	backend backend
	users   int
}

func (s scenario) data() dataKey { return dataKey{s.backend, s.users} }

// seeding is what the report says about a data set.
type seeding struct {
	wall time.Duration // how long getting it took in this run: a seed, or a look in the cache
}

// seed gets the data set from the seeder: from its cache (bench/.cache for SQLite, a
// usersd_bench_<size> database for PostgreSQL), seeded first if missing or made by other migrations.
func (r *runner) seed(k dataKey) error {
	if _, ok := r.seeds[k]; ok {
		return nil
	}
	summaryPath := filepath.Join(r.work, fmt.Sprintf("seed-%s-%d.json", k.backend, k.users))
	args := []string{"-users", strconv.Itoa(k.users), "-summary", summaryPath}
	if r.migrations != "" {
		args = append(args, "-migrations", r.migrations)
	}
	switch k.backend {
	case sqlite:
		args = append(args, "-cache", r.cacheDir)
	case postgres:
		args = append(args, "-postgres", r.postgresURL)
	}
	fmt.Printf("data: %s users on %s...\n", fmtCount(float64(k.users)), k.backend.label())
	start := time.Now()
	cmd := exec.Command(filepath.Join(r.bin, "seed"), args...)
	cmd.Stderr = os.Stdout // the seeder's progress, in the run's output
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("seed %d users on %s: %w", k.users, k.backend, err)
	}
	b, err := os.ReadFile(summaryPath)
	if err != nil {
		return err
	}
	var res seeded.Result
	if err := json.Unmarshal(b, &res); err != nil {
		return fmt.Errorf("the seeder's summary: %w", err)
	}
	if res.Users != k.users || res.DB == "" {
		return fmt.Errorf("the seeder's summary says %d users at %q, want %d", res.Users, res.DB, k.users)
	}
	r.seeds[k] = res
	r.seedings[k] = seeding{wall: time.Since(start)}
	return nil
}

// data is what the current scenario's data set holds.
func (r *runner) data() summaryOf { return r.seeds[r.current.data()] }

// memo computes the expected ids of a page once per run: some take seconds at ten million users.
func (r *runner) memo(kind string, n int, compute func() []int32) []int32 {
	key := kind + "/" + strconv.Itoa(n)
	if ids, ok := r.expected[key]; ok {
		return ids
	}
	ids := compute()
	r.expected[key] = ids
	return ids
}

// user returns the fixture's user id, made once per run.
func (r *runner) user(id int32) fixture.User {
	if u, ok := r.users[id]; ok {
		return u
	}
	u, _ := fixture.Find(id)
	r.users[id] = u
	return u
}

// fileState is what must not change about a shared SQLite file during a read-only run.
type fileState struct {
	size    int64
	modTime time.Time
}

func statFile(path string) (fileState, error) {
	info, err := os.Stat(path)
	if err != nil {
		return fileState{}, err
	}
	return fileState{info.Size(), info.ModTime()}, nil
}

// sharedSQLite readies the cached SQLite file for a read-only run: usersd opens it in place, since
// copying gigabytes for every run of every read-only scenario would cost more than the runs. It
// reads the whole file first, so that it is in the page cache as a fresh copy would be (the VM pages
// out idle file pages; see docs/PERFORMANCE.md), and returns its state, which must be the same after
// the run.
func sharedSQLite(path string) (fileState, error) {
	f, err := os.Open(path)
	if err != nil {
		return fileState{}, err
	}
	defer f.Close()
	if _, err := io.Copy(io.Discard, f); err != nil {
		return fileState{}, fmt.Errorf("read %s: %w", path, err)
	}
	return statFile(path)
}

// checkUnchanged fails when a read-only run changed the shared file: its later runs would not
// measure the seeded data. The file is then removed from the cache, so the next run seeds it again.
func checkUnchanged(path string, before fileState) error {
	after, err := statFile(path)
	if err != nil {
		return err
	}
	if after != before {
		os.Remove(path)
		return errors.New("usersd changed the shared SQLite file of a read-only scenario (removed from the cache): " + path)
	}
	return nil
}

// dataReport is the report's section on the data sets: how large each is and how long it took to
// seed. The sizes are measured now: a SQLite file's size (checkpointed by the seeder), a PostgreSQL
// database's pg_database_size.
func (r *runner) dataReport(todo []scenario) string {
	var keys []dataKey
	for _, sc := range todo {
		if k := sc.data(); sc.server == usersd && !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n### Data sets\n\n| Backend | Users | Size | Seeded in | This run |\n|---|---:|---:|---:|---|\n")
	for _, k := range keys {
		res := r.seeds[k]
		size := "unknown"
		if bytes, err := r.dataBytes(k.backend, res.DB); err == nil {
			size = fmt.Sprintf("%.1f MiB", float64(bytes)/(1<<20))
		}
		how := fmt.Sprintf("seeded (%.1f s)", r.seedings[k].wall.Seconds())
		if res.Reused {
			how = fmt.Sprintf("from the cache (%.1f s)", r.seedings[k].wall.Seconds())
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %.1f s | %s |\n", k.backend.label(), fmtCount(float64(k.users)), size, res.SeedSeconds, how)
	}
	b.WriteString("\nSeeding drops the users indexes and count triggers, loads the rows (SQLite: INSERTs of 200 rows in transactions of 500,000; PostgreSQL: COPY), makes the indexes again, writes the counts and checks them against the fixture; on PostgreSQL it then runs VACUUM (ANALYZE) users, as a team that loaded the data would (autovacuum might not: it can be off). Read-only runs share the seeded data; write runs get a fresh copy.\n")
	return b.String()
}

// dataBytes is how much disk a data set takes.
func (r *runner) dataBytes(b backend, db string) (int64, error) {
	if b == sqlite {
		info, err := os.Stat(db)
		if err != nil {
			return 0, err
		}
		return info.Size(), nil
	}
	name, err := seeded.DatabaseOf(db)
	if err != nil {
		return 0, err
	}
	return r.postgresSize(name)
}
