// Command benchrun is the engine of bench/run: it seeds usersd's data, then runs every scenario
// (usersd and the baselines, one at a time, pinned to CPU 0, with the load generator on CPU 1)
// in interleaved rounds, and writes the table of medians and ratios. bench/run installs the load
// generators and builds the programs before it starts this.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"usersd/bench/internal/fixture"
	"usersd/bench/internal/launch"
	"usersd/bench/internal/procstat"
	"usersd/bench/internal/seeded"
)

// apiKey is the key usersd is started with (USERS_API_KEYS) and the write scenario sends.
const apiKey = "bench-key-0123456789"

// runner holds the settings of one benchmark run and what it has measured so far.
type runner struct {
	bin       string // folder with usersd, baseline-http, baseline-grpc and seed
	wrkScript string
	work      string // scratch folder, removed at the end
	rounds    int
	duration  time.Duration
	warmup    time.Duration
	million   bool
	shapes    bool   // run shapeScenarios
	commits   bool   // run commitScenarios
	against   string // the revision that -bin's usersd-against was built at; "" for none
	// profileDir, when set, gets a CPU profile of every run of this checkout's usersd (profile.go).
	profileDir string
	only       map[string]bool
	// sizes and backends select the scale scenarios (scale.go); empty runs the default ones.
	sizes    []int
	backends []backend
	// Where the seeder keeps data sets: SQLite files in cacheDir, PostgreSQL databases on the server
	// that postgresURL names. migrations is usersd's migrations folder, whose hash keys that cache.
	cacheDir, postgresURL, migrations string
	// quietWait is how long each run may wait for the machine to be quiet (both CPUs below
	// quietBusy percent busy) before it starts; 0 starts at once.
	quietWait time.Duration
	quietBusy float64
	// A run in which other work took more than maxOther percent of either CPU is repeated, up to
	// retries times; the last attempt is kept either way.
	maxOther float64
	retries  int
	ticks    int64 // clock ticks per second of /proc's CPU times

	seeds    map[dataKey]seeded.Result
	seedings map[dataKey]seeding
	current  scenario
	records  []record
	// What the current run's checks expect, found by its prepare step: the page token deep in the
	// collection, and the ids of the page after it.
	cursor    string
	cursorIDs []int32
	// Expected pages and users, computed once per run (fixture.go can take seconds at 10M).
	expected map[string][]int32
	// filterWants holds the filter scenarios' answers by size, then by kind (filters.go).
	filterWants map[int]map[string]listWant
	users       map[int32]fixture.User

	mu         sync.Mutex
	servers    map[*launch.Server]bool // running now, to stop on a signal
	freshDBs   map[string]bool         // PostgreSQL databases made for write runs, to drop on a signal
	freshCount int
}

// record is one run of one scenario in one round.
type record struct {
	round     int
	scenario  string
	res       result
	cpuPerReq float64 // server CPU µs per completed request
	// dbCPUPerReq is the CPU µs per completed request of the PostgreSQL processes that served the
	// run (postgresTicks); 0 on SQLite, which runs inside usersd.
	dbCPUPerReq float64
	rssKiB      int64
	// otherCPU is the larger share (%) of CPU 0 or CPU 1 that went to anything but the server (on
	// 0) or the load generator (on 1) during the measurement: other people's work. On PostgreSQL,
	// whose processes run on either CPU, it is what both CPUs did beyond the server, the load
	// generator and PostgreSQL's work for the run, as a share of one CPU.
	otherCPU  float64
	clientCPU float64 // % of CPU 1 used by the load generator
	attempts  int     // 1, or more when a run was repeated because other work took its CPUs
	load1     string  // the 1-minute load average when the run started
	waited    time.Duration
	quiet     bool // whether the machine was quiet when the run started
	note      string
	err       error
}

func main() {
	r := &runner{
		seeds: map[dataKey]seeded.Result{}, seedings: map[dataKey]seeding{}, expected: map[string][]int32{},
		users: map[int32]fixture.User{}, servers: map[*launch.Server]bool{}, freshDBs: map[string]bool{},
	}
	var out, only, command, commit, sizes, backends string
	var quick bool
	flag.BoolVar(&r.commits, "commits", false, "run POST /users at 1, 4, 16 and 64 connections on SQLite and PostgreSQL, with group commit and without")
	flag.BoolVar(&r.shapes, "shapes", false, "run GetUser on REST, Connect and gRPC at 1x1, 16x1 and 16x16 connections x streams")
	flag.StringVar(&r.profileDir, "profile", "", "write a CPU profile of each run to this folder, and report CPU per request by layer (profiled figures are not for quoting)")
	flag.StringVar(&r.against, "against", "", "also run every usersd scenario on "+againstBin+" in -bin, built at this revision, and compare")
	flag.StringVar(&r.bin, "bin", "", "folder with the built usersd, baseline-http, baseline-grpc and seed")
	flag.StringVar(&r.wrkScript, "wrk-script", "", "bench/wrk/bench.lua")
	flag.StringVar(&out, "out", "", "folder for results.tsv and report.md")
	flag.IntVar(&r.rounds, "rounds", 3, "rounds; each runs every scenario once, in turn")
	flag.DurationVar(&r.duration, "duration", 10*time.Second, "measured time per scenario and round")
	flag.DurationVar(&r.warmup, "warmup", 3*time.Second, "load before each measurement, not measured")
	flag.BoolVar(&quick, "quick", false, "1 round, 3s measured, 1s warm-up (unless given)")
	flag.BoolVar(&r.million, "million", false, "also seed 1,000,000 users and run the list scenarios on them")
	flag.StringVar(&sizes, "sizes", "", "run the scale scenarios at these sizes, such as 1k,1m,10m (default with -backends: 1k)")
	flag.StringVar(&backends, "backends", "", "run the scale scenarios on these backends: sqlite, postgres (default with -sizes: sqlite)")
	flag.StringVar(&r.postgresURL, "postgres", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable",
		"PostgreSQL server for the postgres backend; the harness makes and drops only databases named usersd_bench_*")
	flag.StringVar(&r.cacheDir, "cache", "", "folder for the seeded SQLite files, reused across runs (bench/run: bench/.cache)")
	flag.StringVar(&r.migrations, "migrations", "", "usersd's store/sqlstore/migrations, whose hash keys the seeded data (bench/run gives it)")
	flag.DurationVar(&r.quietWait, "quiet-wait", 10*time.Second, "how long each run may wait for other processes to calm down (0: no wait)")
	flag.Float64Var(&r.quietBusy, "quiet-busy", 10, "CPU busy percent under which the machine counts as quiet")
	flag.Float64Var(&r.maxOther, "max-other", 10, "repeat a run in which other processes took more than this percent of either CPU")
	flag.IntVar(&r.retries, "retries", 2, "how many times a disturbed run may be repeated")
	flag.StringVar(&only, "only", "", "comma-separated scenario ids to run (default: all)")
	flag.StringVar(&command, "command", "", "the command line, for the report")
	flag.StringVar(&commit, "commit", "", "the commit measured, for the report")
	flag.Parse()
	if quick {
		set := map[string]bool{}
		flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if !set["rounds"] {
			r.rounds = 1
		}
		if !set["duration"] {
			r.duration = 3 * time.Second
		}
		if !set["warmup"] {
			r.warmup = time.Second
		}
	}
	if only != "" {
		r.only = map[string]bool{}
		for id := range strings.SplitSeq(only, ",") {
			r.only[strings.TrimSpace(id)] = true
		}
	}
	if err := r.parseScale(sizes, backends); err != nil {
		fmt.Fprintln(os.Stderr, "benchrun:", err)
		os.Exit(2)
	}
	if r.cacheDir == "" {
		r.cacheDir = filepath.Join(os.TempDir(), "usersd-bench-cache")
	}
	if r.bin == "" || r.wrkScript == "" || out == "" {
		fmt.Fprintln(os.Stderr, "benchrun: -bin, -wrk-script and -out are required (bench/run gives them)")
		os.Exit(2)
	}
	if err := r.main(out, command, commit); err != nil {
		fmt.Fprintln(os.Stderr, "benchrun:", err)
		os.Exit(1)
	}
}

func (r *runner) main(out, command, commit string) error {
	var err error
	if r.ticks, err = procstat.ClockTicks(); err != nil {
		return err
	}
	if r.work, err = os.MkdirTemp("", "usersd-bench-"); err != nil {
		return err
	}
	defer os.RemoveAll(r.work)
	r.stopOnSignal()
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	if r.profileDir != "" {
		if err := os.MkdirAll(r.profileDir, 0o755); err != nil {
			return err
		}
	}
	info := machineInfo(r, command, commit)

	todo, err := r.scenariosToRun()
	if err != nil {
		return err
	}
	todo = withAgainst(todo, r.against)
	for _, sc := range todo {
		if sc.server == usersd && sc.users > 0 { // 0: a new file that usersd makes
			if err := r.seed(sc.data()); err != nil {
				return err
			}
		}
	}
	for _, sc := range todo {
		if sc.backend == postgres {
			info.postgres = r.postgresVersion()
			break
		}
	}

	fmt.Printf("%d rounds x %d scenarios, %s measured after %s of warm-up each\n", r.rounds, len(todo), r.duration, r.warmup)
	for round := 1; round <= r.rounds; round++ {
		for _, sc := range todo {
			var rec record
			for attempt := 1; ; attempt++ {
				rec = r.runOne(round, sc)
				rec.attempts = attempt
				if rec.err != nil || rec.otherCPU <= r.maxOther || attempt > r.retries {
					break
				}
				fmt.Printf("round %d  %-15s disturbed: other work took %.0f%% of a CPU; again\n", round, sc.id, rec.otherCPU)
			}
			r.records = append(r.records, rec)
			if rec.err != nil {
				fmt.Printf("round %d  %-15s FAILED: %v\n", round, sc.id, rec.err)
				continue
			}
			fmt.Printf("round %d  %-15s %9.0f req/s  p50 %-9s p99 %-9s %7.1f µs/req  RSS %5.1f MiB  others %3.0f%%  client %3.0f%%  waited %s%s  %s\n",
				round, sc.id, rec.res.rps, fmtLatency(rec.res.p50), fmtLatency(rec.res.p99), rec.cpuPerReq,
				float64(rec.rssKiB)/1024, rec.otherCPU, rec.clientCPU, rec.waited, notQuiet(rec), rec.note)
		}
	}

	if err := writeTSV(filepath.Join(out, "results.tsv"), r.records); err != nil {
		return err
	}
	sums := summarize(todo, r.records, r.maxOther)
	table := reportMarkdown(info, todo, r.records, r.dataReport(todo)) +
		againstReport(r.against, todo, sums, r.records) + r.layersReport(todo, sums)
	if err := os.WriteFile(filepath.Join(out, "report.md"), []byte(table), 0o644); err != nil {
		return err
	}
	fmt.Printf("\n%s\nresults: %s\n", table, out)
	for _, rec := range r.records {
		if rec.err != nil {
			return errors.New("some runs failed; see above")
		}
	}
	return nil
}

// runOne starts the scenario's server, checks it, warms it up, measures, and stops it.
func (r *runner) runOne(round int, sc scenario) (rec record) {
	rec = record{round: round, scenario: sc.id}
	r.current, r.cursor, r.cursorIDs = sc, "", nil
	dir := filepath.Join(r.work, fmt.Sprintf("%d-%s", round, sc.id))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		rec.err = err
		return rec
	}
	defer os.RemoveAll(dir) // the access log of a run can be large

	var bin, db, dbName, admin string // admin: the admin listener's address, when this run is profiled
	var args, env []string
	var shared *fileState // the state of a shared SQLite file, which the run must leave as it was
	switch sc.server {
	case usersd:
		var cleanup func()
		var err error
		if db, dbName, cleanup, shared, err = r.runData(sc, dir); err != nil {
			rec.err = err
			return rec
		}
		defer cleanup()
		bin, args, env = cmpOr(sc.bin, "usersd"), []string{"-addr", "127.0.0.1:0", "-db", db}, []string{"USERS_API_KEYS=" + apiKey}
		args = append(args, sc.serverArgs...)
		if r.profileDir != "" && sc.bin == "" {
			if admin, err = adminAddr(); err != nil {
				rec.err = err
				return rec
			}
			args = append(args, "-admin-addr", admin)
		}
	case baselineHTTP:
		bin, args = "baseline-http", []string{"-addr", "127.0.0.1:0", "-users", fmt.Sprint(sc.users)}
	case baselineGRPC:
		bin, args = "baseline-grpc", []string{"-addr", "127.0.0.1:0", "-users", fmt.Sprint(sc.users)}
	}
	if r.profileDir != "" && sc.server != usersd {
		var err error
		if admin, err = adminAddr(); err != nil {
			rec.err = err
			return rec
		}
		args = append(args, "-admin-addr", admin)
	}
	rec.waited, rec.quiet = r.waitQuiet()
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		rec.load1, _, _ = strings.Cut(string(b), " ")
	}

	srv, err := r.start(filepath.Join(r.bin, bin), args, env, filepath.Join(dir, "server.log"))
	if err != nil {
		rec.err = err
		return rec
	}
	stopped := false
	defer func() {
		if !stopped {
			r.stop(srv, syscall.SIGTERM)
		}
	}()
	fail := func(err error) record {
		rec.err = fmt.Errorf("%w\nserver log ends: %s", err, procstat.Tail(srv.Log))
		return rec
	}

	if sc.prepare != nil {
		if err := sc.prepare(r, srv.Addr); err != nil {
			return fail(fmt.Errorf("prepare: %w", err))
		}
	}
	if err := sc.check(r, srv.Addr); err != nil {
		return fail(fmt.Errorf("check before load: %w", err))
	}
	warmLoad, warmFor := sc.warming(r.warmup)
	warm, err := warmLoad.run(r, srv.Addr, warmFor, dir)
	if err != nil {
		return fail(fmt.Errorf("warm-up: %w", err))
	}
	var profiled <-chan error
	if admin != "" {
		profiled = profileCPU(admin, sc.measuring(r.duration), r.profilePath(round, sc))
	}
	m, err := r.measure(sc, srv, dbName, dir)
	if profiled != nil {
		err = errors.Join(err, <-profiled)
	}
	if err != nil {
		return fail(err)
	}
	rec.res, rec.rssKiB, rec.cpuPerReq, rec.dbCPUPerReq, rec.otherCPU, rec.clientCPU = m.res, m.rssKiB, m.cpuPerReq, m.dbCPUPerReq, m.otherCPU, m.clientCPU
	if m.res.requests == 0 {
		return fail(errors.New("no request completed"))
	}

	if !sc.creates {
		if err := sc.check(r, srv.Addr); err != nil {
			return fail(fmt.Errorf("check after load: %w", err))
		}
		if sc.writes && m.res.badStatus+warm.badStatus > 0 {
			return fail(fmt.Errorf("%d writes were not answered 2xx", m.res.badStatus+warm.badStatus))
		}
		if shared != nil {
			r.stop(srv, syscall.SIGTERM)
			stopped = true
			if err := checkUnchanged(r.seeds[sc.data()].DB, *shared); err != nil {
				rec.err = err
			}
		}
		return rec
	}

	// The write scenario: the total that usersd reports must be the users in the database. Then
	// every create that was answered 2xx must be in the database after a crash: kill the process
	// (no graceful shutdown) and count.
	if err := checkCreatedTotal(r, srv.Addr, db); err != nil {
		return fail(fmt.Errorf("check after load: %w", err))
	}
	r.stop(srv, syscall.SIGKILL)
	stopped = true
	if s5xx := warm.s5xx + m.res.s5xx; s5xx > 0 {
		rec.err = fmt.Errorf("%d answers were 5xx", s5xx)
		return rec
	}
	acked := warm.s2xx + m.res.s2xx
	rows, err := r.countUsers(db)
	if err != nil {
		rec.err = err
		return rec
	}
	created := rows - int64(sc.users)
	if created < acked {
		rec.err = fmt.Errorf("lost writes: %d creates acknowledged, %d users in the database after SIGKILL", acked, created)
		return rec
	}
	rec.note = fmt.Sprintf("durable: %d of %d acknowledged creates found after SIGKILL (+%d unanswered), 0 5xx; X-Total-Count exact", acked, acked, created-acked)
	return rec
}

// runData returns the -db that usersd runs on for sc, with what to do after the run. A read-only run
// shares the seeded data set (a SQLite file's state is returned, to check afterwards that the run
// left it as it was); a write run gets a fresh copy, removed afterwards. dbName is the PostgreSQL
// database, whose server processes the run measures.
func (r *runner) runData(sc scenario, dir string) (db, dbName string, cleanup func(), shared *fileState, err error) {
	seed := r.seeds[sc.data()]
	cleanup = func() {}
	switch {
	case sc.backend == sqlite && sc.users == 0:
		return filepath.Join(dir, "users.db"), "", cleanup, nil, nil
	case sc.backend == sqlite && !sc.creates && !sc.writes:
		state, err := sharedSQLite(seed.DB)
		return seed.DB, "", cleanup, &state, err
	case sc.backend == sqlite:
		db = filepath.Join(dir, "users.db")
		return db, "", cleanup, nil, copyFile(seed.DB, db)
	case !sc.creates && !sc.writes:
		dbName, err = seeded.DatabaseOf(seed.DB)
		return seed.DB, dbName, cleanup, nil, err
	default:
		db, dbName, err = r.freshPostgres(seed.DB)
		cleanup = func() {
			if err := r.dropPostgres(dbName); err != nil {
				fmt.Fprintln(os.Stderr, "benchrun:", err)
			}
		}
		return db, dbName, cleanup, nil, err
	}
}

// measurement is what one measured load run gave, with the CPU it took.
type measurement struct {
	res                    result
	rssKiB                 int64
	cpuPerReq, dbCPUPerReq float64
	otherCPU, clientCPU    float64
}

// measure runs the scenario's load for the measured duration and reads the CPU time that the
// server, the load generator, PostgreSQL (for dbName) and everything else spent meanwhile.
func (r *runner) measure(sc scenario, srv *launch.Server, dbName, dir string) (m measurement, err error) {
	var db0, db1 map[int]int64
	var errDB0, errDB1 error
	if dbName != "" {
		db0, errDB0 = postgresTicks(dbName)
	}
	ticks0, err1 := procstat.CPUTicks(srv.Pid())
	busy0, err2 := procstat.CPUBusy()
	res, err3 := sc.load.run(r, srv.Addr, sc.measuring(r.duration), dir)
	ticks1, err4 := procstat.CPUTicks(srv.Pid())
	busy1, err5 := procstat.CPUBusy()
	if dbName != "" {
		db1, errDB1 = postgresTicks(dbName)
	}
	memory, err6 := procstat.ReadMemory(srv.Pid())
	if err := errors.Join(err1, err2, err3, err4, err5, err6, errDB0, errDB1); err != nil {
		return m, err
	}
	server0, client0, server1, client1 := busy0["cpu0"], busy0["cpu1"], busy1["cpu0"], busy1["cpu1"]
	m.res, m.rssKiB = res, memory.HWM
	dbTicks := procstat.TicksSince(db0, db1)
	if res.requests > 0 {
		perReq := 1e6 / float64(r.ticks) / float64(res.requests)
		m.cpuPerReq = float64(ticks1-ticks0) * perReq
		m.dbCPUPerReq = float64(dbTicks) * perReq
	}
	if res.wall > 0 {
		window := res.wall.Seconds() * float64(r.ticks)
		clientTicks := res.clientCPU.Seconds() * float64(r.ticks)
		if dbName == "" {
			m.otherCPU = max(float64((server1-server0)-(ticks1-ticks0)), float64(client1-client0)-clientTicks, 0) / window * 100
		} else {
			// PostgreSQL runs on both CPUs, so other work is what both CPUs did beyond the server,
			// the load generator and PostgreSQL's processes for this database, as a share of one CPU.
			busy := float64((server1 - server0) + (client1 - client0))
			m.otherCPU = max(busy-float64(ticks1-ticks0)-clientTicks-float64(dbTicks), 0) / window * 100
		}
		m.clientCPU = res.clientCPU.Seconds() / res.wall.Seconds() * 100
	}
	return m, nil
}

// waitQuiet waits, up to quietWait, until neither CPU has been busier than quietBusy percent for
// half a second: on a shared machine, other work on either CPU distorts the run. It says how long
// it waited and whether the machine was quiet in the end.
func (r *runner) waitQuiet() (time.Duration, bool) {
	start := time.Now()
	for {
		quiet := true
		before, err1 := procstat.CPUBusy()
		const sample = 500 * time.Millisecond
		time.Sleep(sample)
		after, err2 := procstat.CPUBusy()
		for _, cpu := range []string{"cpu0", "cpu1"} {
			busy := float64(after[cpu]-before[cpu]) / (sample.Seconds() * float64(r.ticks)) * 100
			if err1 != nil || err2 != nil || busy > r.quietBusy {
				quiet = false
			}
		}
		if quiet || time.Since(start) >= r.quietWait {
			return time.Since(start).Round(100 * time.Millisecond), quiet
		}
	}
}

// countUsers counts the users in a usersd SQLite file or PostgreSQL database with the seeder, which
// opens a SQLite file as SQLite does after a crash (replaying the WAL).
func (r *runner) countUsers(path string) (int64, error) {
	out, err := exec.Command(filepath.Join(r.bin, "seed"), "-count", "-db", path).Output()
	if err != nil {
		return 0, fmt.Errorf("count users: %w", err)
	}
	var n int64
	_, err = fmt.Sscan(string(out), &n)
	return n, err
}

func (r *runner) start(bin string, args, env []string, logPath string) (*launch.Server, error) {
	srv, err := launch.Start(bin, "0", args, env, logPath)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.servers[srv] = true
	r.mu.Unlock()
	return srv, nil
}

func (r *runner) stop(srv *launch.Server, sig syscall.Signal) {
	srv.Stop(sig)
	r.mu.Lock()
	delete(r.servers, srv)
	r.mu.Unlock()
}

// stopOnSignal stops the servers this run started (only those, by their pids), drops the
// PostgreSQL databases it made for write runs, and removes the scratch folder when the run is
// interrupted. The load generators get the terminal's signal
// themselves, or end with their duration.
func (r *runner) stopOnSignal() {
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		sig := <-signals
		r.mu.Lock()
		for srv := range r.servers {
			srv.Stop(syscall.SIGKILL)
		}
		var fresh []string
		for name := range r.freshDBs {
			fresh = append(fresh, name)
		}
		r.mu.Unlock()
		for _, name := range fresh {
			if err := r.dropPostgres(name); err != nil {
				fmt.Fprintln(os.Stderr, "benchrun:", err)
			}
		}
		os.RemoveAll(r.work)
		fmt.Fprintf(os.Stderr, "benchrun: stopped by %s\n", sig)
		os.Exit(130)
	}()
}

func notQuiet(rec record) string {
	if rec.quiet {
		return ""
	}
	return " (not quiet)"
}

func copyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}
