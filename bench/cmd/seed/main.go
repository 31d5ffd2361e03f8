// Command seed writes the benchmark's users (bench/internal/fixture) into a usersd database, fast
// enough for ten million: sqlstore.Open creates the schema exactly as usersd would, then the rows go
// in in bulk, with the users indexes dropped and made again afterwards and the kept counts written
// once at the end. SQLite and PostgreSQL alike.
//
//	seed -users 1m -db FILE|URL       seed that SQLite file (new) or PostgreSQL database (no users yet)
//	seed -users 10m -cache DIR        a SQLite file in the cache, seeded only if missing; prints its path
//	seed -users 10m -postgres URL     the database usersd_bench_10m on that server, seeded only if
//	                                  missing or made by other migrations; prints its URL
//	seed -count -db FILE|URL          print how many users there are
//
// The cache is keyed by the size and a hash of the backend's migration files (-migrations), so a
// schema change seeds again. -summary writes what the data holds (bench/internal/seeded.Result).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"time"

	"usersd/bench/internal/fixture"
	"usersd/bench/internal/seeded"
	"usersd/store/sqlstore"
)

// sizeFlag is a number of users given as 1000, 1k, 1m or 10m.
type sizeFlag int

func (s *sizeFlag) String() string { return seeded.SizeName(int(*s)) }
func (s *sizeFlag) Set(v string) error {
	n, err := seeded.ParseSize(v)
	*s = sizeFlag(n)
	return err
}

func main() {
	users := sizeFlag(1000)
	flag.Var(&users, "users", "number of users: 1000, 1k, 1m, 10m...")
	db := flag.String("db", "", "seed this new SQLite file or this PostgreSQL database (postgres://...)")
	cache := flag.String("cache", "", "keep the seeded SQLite file in this folder and reuse it")
	postgres := flag.String("postgres", "", "keep the seeded PostgreSQL database on this server (postgres://...) and reuse it")
	migrations := flag.String("migrations", "", "usersd's store/sqlstore/migrations, whose hash keys the cache (default: found above the working folder)")
	reseed := flag.Bool("reseed", false, "with -cache or -postgres: seed again even if the cache has the data")
	summaryPath := flag.String("summary", "", "write a JSON summary (where the data is, users, per-role and search counts) here")
	count := flag.Bool("count", false, "only print the number of users in -db")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("seed: ")
	ctx := context.Background()

	if *count {
		if *db == "" {
			log.Fatal("-count needs -db")
		}
		n, err := countUsers(ctx, *db)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(n)
		return
	}

	given := 0
	for _, v := range []string{*db, *cache, *postgres} {
		if v != "" {
			given++
		}
	}
	if given != 1 {
		log.Fatal("give exactly one of -db, -cache and -postgres")
	}
	var res seeded.Result
	var err error
	start := time.Now()
	if *db != "" {
		res.DB = *db
		res.Summary, err = seedOnce(ctx, *db, int(users))
		res.SeedSeconds = time.Since(start).Seconds()
	} else {
		backend := "sqlite"
		if *postgres != "" {
			backend = "postgres"
		}
		var key string
		if key, err = schemaKey(*migrations, backend); err != nil {
			log.Fatal(err)
		}
		if *cache != "" {
			res, err = cachedSQLite(ctx, *cache, key, int(users), *reseed)
		} else {
			res, err = cachedPostgres(ctx, *postgres, key, int(users), *reseed)
		}
	}
	if err != nil {
		log.Fatal(err)
	}
	if *summaryPath != "" {
		out, _ := json.Marshal(res)
		if err := os.WriteFile(*summaryPath, append(out, '\n'), 0o644); err != nil {
			log.Fatal(err)
		}
	}
	if res.Reused {
		log.Printf("%d users in %s, from the cache (seeded in %.1fs)", res.Users, redact(res.DB), res.SeedSeconds)
	} else {
		log.Printf("%d users in %s (%.1fs)", res.Users, redact(res.DB), time.Since(start).Seconds())
	}
	if *db == "" {
		fmt.Println(res.DB)
	}
}

// seedOnce fills db, a new SQLite file or a PostgreSQL database without users, with users 1..n.
func seedOnce(ctx context.Context, db string, n int) (fixture.Summary, error) {
	if seeded.IsPostgres(db) {
		return seedPostgres(ctx, db, n)
	}
	return seedSQLite(ctx, db, n)
}

func countUsers(ctx context.Context, db string) (int64, error) {
	if seeded.IsPostgres(db) {
		return countPostgres(ctx, db)
	}
	return countSQLite(db)
}

// recountUsers rebuilds the counts that usersd keeps, with usersd's own code, after a load that
// went around the count triggers, and returns them by scope.
func recountUsers(ctx context.Context, db string) (map[string]int64, error) {
	st, err := sqlstore.Open(ctx, db)
	if err != nil {
		return nil, fmt.Errorf("open %s to count its users: %w", redact(db), err)
	}
	defer st.Close()
	return st.RecountUsers(ctx)
}

// checkCounts compares the counts that the database keeps (scope -> n, as in user_counts) with
// what the fixture made: the seeder writes them itself, so it proves them exact.
func checkCounts(kept map[string]int64, want fixture.Summary) error {
	wantKept := map[string]int64{"all": int64(want.Users)}
	for role, n := range want.Roles {
		wantKept["role:"+role] = int64(n)
	}
	if want.Inactive > 0 {
		wantKept["inactive"] = int64(want.Inactive)
	}
	teams := 0
	for team, n := range want.Teams {
		wantKept["label:team="+team] = int64(n)
		teams += n
	}
	if teams > 0 {
		wantKept["labelkey:team"] = int64(teams)
	}
	var errs []error
	for scope, n := range wantKept {
		if kept[scope] != n {
			errs = append(errs, fmt.Errorf("user_counts %q: %d, want %d", scope, kept[scope], n))
		}
	}
	for scope := range kept {
		if _, ok := wantKept[scope]; !ok {
			errs = append(errs, fmt.Errorf("user_counts has %q, which no user has", scope))
		}
	}
	return errors.Join(errs...)
}

// phase logs how long a step of a seed took, for tuning the seeder.
func phase(name string, start time.Time) {
	log.Printf("  %-34s %7.1fs", name, time.Since(start).Seconds())
}
