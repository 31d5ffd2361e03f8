// Command watchload measures usersd with many watchers of users while writes arrive. It runs two
// phases, each on a fresh usersd and a fresh database (or both on one server it is given, -addr):
//
//  1. baseline: -rate creates a second for -duration over gRPC with the API key, and no watcher;
//  2. watch: the same, after opening -watchers WatchUsers streams over gRPC on h2c with the
//     generated connect-go client, -per-conn of them on each HTTP/2 connection, each having had
//     its first heartbeat.
//
// With -webhooks N the fan-out phase makes N webhook subscriptions instead, to a receiver that
// watchload serves on loopback, and each subscription's deliveries are checked as a watcher's
// events are (see webhooks.go).
//
// Every watcher checks that it receives each acknowledged create exactly once, in sequence order,
// and records each event's delivery latency twice: from the time the create was sent (written in
// the user's name) and from the time its answer came back. The server's CPU time over the same
// creates with and without watchers gives the CPU per delivered event.
//
//	go build -o /tmp/usersd ./cmd/usersd        # in the repository's root
//	cd bench && go run ./cmd/watchload -bin /tmp/usersd
//	go run ./cmd/watchload -bin /tmp/usersd -db 'postgres://postgres@127.0.0.1:5432/test?sslmode=disable'
//
// By default usersd is pinned to CPU 0 and watchload to CPU 1, as bench/run does (-server-cpus,
// -client-cpus; "" for no pinning). The report is a Markdown table on stdout; progress goes to
// stderr; the exit status is 2 when a check failed. See docs/PERFORMANCE.md#watch-fan-out and
// docs/PERFORMANCE.md#webhook-fan-out.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"usersd/bench/internal/launch"
	"usersd/bench/internal/procstat"
)

type options struct {
	bin, addr, key, db string
	pid                int
	watchers, perConn  int
	webhooks           int
	rate               float64
	duration, drain    time.Duration
	settle             time.Duration
	writers            int
	baseline           bool
	serverCPUs         string
	clientCPUs         string
	quietWait          time.Duration
	serverArgs         []string
}

func main() {
	var o options
	var serverArgs string
	flag.StringVar(&o.bin, "bin", "/tmp/usersd", "usersd binary to start for each phase")
	flag.StringVar(&o.addr, "addr", "", "an usersd already running (host:port) to use instead of starting one; both phases then use it")
	flag.IntVar(&o.pid, "pid", 0, "with -addr: the server's pid, for its CPU and memory")
	flag.StringVar(&o.key, "api-key", "", "with -addr: an API key the server accepts (otherwise a fresh key is made for each server started)")
	flag.StringVar(&o.db, "db", "", "the store: empty for a fresh SQLite file in a temporary folder for each phase, or a postgres:// URL in whose database each phase gets a fresh schema "+schemaPrefix+"PID_PHASE, dropped at the end")
	flag.IntVar(&o.watchers, "watchers", 1000, "watch streams in the watch phase")
	flag.IntVar(&o.webhooks, "webhooks", 0, "deliver through this many webhook subscriptions, to a receiver watchload serves on loopback, instead of -watchers watch streams (usersd then runs with -webhooks-allow-http and -webhooks-allow-private)")
	flag.IntVar(&o.perConn, "per-conn", 100, "watch streams on each HTTP/2 connection (usersd allows 250 by default)")
	flag.Float64Var(&o.rate, "rate", 500, "creates a second")
	flag.DurationVar(&o.duration, "duration", 20*time.Second, "how long the writes go on")
	flag.DurationVar(&o.drain, "drain", 15*time.Second, "how long to wait after the last write for every watcher to have every event")
	flag.DurationVar(&o.settle, "settle", time.Second, "pause between opening the watches and the first write (with -webhooks, at least 4s)")
	flag.IntVar(&o.writers, "writers", 64, "creates in flight at most (the pace is -rate; this only bounds the concurrency)")
	flag.BoolVar(&o.baseline, "baseline", true, "also run the same writes with no watcher, for the CPU that watching costs")
	flag.StringVar(&o.serverCPUs, "server-cpus", "0", "CPUs to pin usersd to (taskset -c); empty for none")
	flag.StringVar(&o.clientCPUs, "client-cpus", "1", "CPUs to pin watchload itself to; empty for none")
	flag.DurationVar(&o.quietWait, "quiet-wait", 10*time.Second, "before each phase, wait up to this long for every CPU to be under 10% busy")
	flag.StringVar(&serverArgs, "server-args", "", "more usersd flags, space-separated (e.g. \"-max-watchers 2000\")")
	flag.Parse()
	o.serverArgs = strings.Fields(serverArgs)
	if o.webhooks > 0 {
		o.watchers = o.webhooks
		o.serverArgs = append(o.serverArgs, "-webhooks-allow-http", "-webhooks-allow-private")
	}
	if o.watchers <= 0 || o.perConn <= 0 || o.rate <= 0 || o.duration <= 0 || o.writers <= 0 {
		fatal(errors.New("-watchers, -per-conn, -rate, -duration and -writers must be positive"))
	}
	if o.addr != "" && o.db != "" {
		fatal(errors.New("-db is for servers that watchload starts; -addr names one already running"))
	}
	pinSelf(o.clientCPUs)

	ok, err := run(o)
	if err != nil {
		fatal(err)
	}
	if !ok {
		os.Exit(2)
	}
}

// run runs the phases and prints the report; ok is false when a check failed.
func run(o options) (ok bool, err error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ticks, err := procstat.ClockTicks()
	if err != nil {
		return false, err
	}
	work, err := os.MkdirTemp("", "watchload-")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(work)

	var results []*phaseResult
	phases := []int{o.watchers}
	if o.baseline {
		phases = []int{0, o.watchers}
	}
	for n, watchers := range phases {
		name := "watch"
		if watchers == 0 {
			name = "baseline"
		}
		progress("phase %d of %d: %s, %d watchers, %.0f creates/s for %s", n+1, len(phases), name, watchers, o.rate, o.duration)
		waitQuiet(o.quietWait, ticks)
		r, err := runPhase(ctx, o, work, name, watchers, ticks)
		if err != nil {
			return false, fmt.Errorf("phase %s: %w", name, err)
		}
		results = append(results, r)
	}
	return report(o, results, ticks), nil
}

// pinSelf runs watchload again under taskset on cpus (once: the variable marks the second run), so
// that every thread of it, and Go's GOMAXPROCS, keep to those CPUs.
func pinSelf(cpus string) {
	const mark = "WATCHLOAD_PINNED"
	if cpus == "" || os.Getenv(mark) != "" {
		return
	}
	taskset, err := exec.LookPath("taskset")
	if err != nil {
		fatal(fmt.Errorf("-client-cpus needs taskset: %w", err))
	}
	self, err := os.Executable()
	if err != nil {
		fatal(err)
	}
	args := append([]string{"taskset", "-c", cpus, self}, os.Args[1:]...)
	fatal(syscall.Exec(taskset, args, append(os.Environ(), mark+"="+cpus)))
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "watchload: "+format+"\n", args...)
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "watchload:", err)
	os.Exit(1)
}

// phaseResult is what one phase measured.
type phaseResult struct {
	name            string
	watchers, conns int
	opened          time.Duration   // from the first watch opened to the last first heartbeat
	idle, end       procstat.Memory // the server's, before the first write and at the end
	serverThreads   int
	writes          writeResult
	window          time.Duration // from the first write to the last ack or the last event
	drained         bool          // every watcher had every acknowledged write by the end
	serverTicks     int64
	clientTicks     int64
	postgresTicks   int64 // -1 when not on PostgreSQL
	othersBusy      float64

	received, expected                             int64
	lost, duplicates, outOfOrder, foreign, early   int64
	undelivered                                    int64 // writes a watcher missed after the end of its stream, which the server cut
	notAcked                                       int64 // events of writes that failed or were not answered
	heartbeats                                     int64
	firstNotHeartbeat                              int
	ended                                          int
	endErrors                                      map[string]int
	endedByConn                                    []int
	firstEnd                                       time.Duration // after the first write, when the first stream ended
	fromSend, fromAck                              hist
	lastDelivery                                   time.Duration // after the last ack
	slowestWatcherReceived, fastestWatcherReceived int64
	overlapping                                    atomic.Int64 // webhook deliveries that came while one of the same subscription was under way
	exit                                           string
}

func runPhase(ctx context.Context, o options, work, name string, nWatchers int, ticks int64) (_ *phaseResult, err error) {
	r := &phaseResult{name: name, watchers: nWatchers, postgresTicks: -1, endErrors: map[string]int{}}
	key := o.key
	addr, pid := o.addr, o.pid // a server already running, or the one started here
	schema := ""
	if o.addr == "" {
		key = randomKey()
		keyFile := filepath.Join(work, name+".keys")
		if err := os.WriteFile(keyFile, []byte(key+"\n"), 0o600); err != nil {
			return nil, err
		}
		db := filepath.Join(work, name+".db")
		if strings.HasPrefix(o.db, "postgres") {
			schema = fmt.Sprintf("%s%d_%s", schemaPrefix, os.Getpid(), name)
			if db, err = freshSchema(ctx, o.db, schema); err != nil {
				return nil, err
			}
			defer func() {
				if dropErr := dropSchema(o.db, schema); dropErr != nil {
					err = errors.Join(err, dropErr)
				}
			}()
		}
		args := append([]string{"-addr", "127.0.0.1:0", "-db", db, "-api-keys-file", keyFile}, o.serverArgs...)
		srv, err := launch.Start(o.bin, o.serverCPUs, args, nil, filepath.Join(work, name+".log"))
		if err != nil {
			return nil, err
		}
		addr, pid = srv.Addr, srv.Pid()
		defer func() {
			r.exit = srv.Stop(syscall.SIGTERM)
			progress("%s: usersd stopped: %s", name, r.exit)
		}()
	} else if key == "" {
		return nil, errors.New("-addr needs -api-key")
	}
	baseURL := "http://" + addr
	writer := usersClient(h2cClient(), baseURL, key)
	total := int(o.rate * o.duration.Seconds())
	acks := make([]atomic.Int64, total)
	seqs := make([]atomic.Int64, total)

	var ws *watchers
	switch {
	case nWatchers > 0 && o.webhooks > 0:
		started := time.Now()
		if ws, err = openHooks(ctx, baseURL, key, nWatchers, &acks, &seqs, total, &r.overlapping); err != nil {
			return nil, err
		}
		defer ws.close()
		r.opened = time.Since(started)
		progress("%s: %d webhook subscriptions made in %s", name, nWatchers, r.opened.Round(time.Millisecond))
	case nWatchers > 0:
		started := time.Now()
		if ws, err = openWatchers(ctx, baseURL, nWatchers, o.perConn, &acks, &seqs, total); err != nil {
			return nil, err
		}
		defer ws.close()
		r.opened = time.Since(started)
		r.conns = len(ws.clients)
		progress("%s: %d watches open on %d connections (%d server connections seen) in %s", name, nWatchers, r.conns, serverConns(addr), r.opened.Round(time.Millisecond))
	}
	settle := o.settle
	if o.webhooks > 0 {
		settle = max(settle, webhookSettle)
	}
	if !sleep(ctx, settle) {
		return nil, ctx.Err()
	}
	if pid != 0 {
		if r.idle, err = procstat.ReadMemory(pid); err != nil {
			return nil, err
		}
	}

	// The measured window: from the first write until every event has arrived.
	serverBefore, _ := procstat.CPUTicks(pid)
	clientBefore, _ := procstat.CPUTicks(os.Getpid())
	busyBefore, _ := procstat.CPUBusy()
	var pgBefore map[int]int64
	if schema != "" {
		if pgBefore, err = backendTicks(ctx, o.db, schema); err != nil {
			return nil, err
		}
	}
	r.writes = drive(ctx, writer, total, o.rate, o.writers, acks)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	progress("%s: %d creates acknowledged, %d failed; create p50 %s p99 %s", name, r.writes.acked, r.writes.failed,
		r.writes.latency.quantile(0.5), r.writes.latency.quantile(0.99))
	end := r.writes.lastAck
	if ws != nil {
		deadline := time.Now().Add(o.drain)
		for {
			behind := ws.behind(int64(r.writes.acked))
			if behind == 0 || time.Now().After(deadline) || ctx.Err() != nil {
				r.drained = behind == 0
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		for _, w := range ws.list {
			if t := time.Unix(0, w.lastReceived); t.After(end) {
				end = t
			}
		}
	}
	r.window = end.Sub(r.writes.first)
	serverAfter, _ := procstat.CPUTicks(pid)
	clientAfter, _ := procstat.CPUTicks(os.Getpid())
	busyAfter, _ := procstat.CPUBusy()
	r.serverTicks, r.clientTicks = serverAfter-serverBefore, clientAfter-clientBefore
	if schema != "" {
		pgAfter, err := backendTicks(ctx, o.db, schema)
		if err != nil {
			return nil, err
		}
		r.postgresTicks = procstat.TicksSince(pgBefore, pgAfter)
	}
	var allBusy int64
	for cpu, after := range busyAfter {
		allBusy += after - busyBefore[cpu]
	}
	others := allBusy - r.serverTicks - r.clientTicks - max(r.postgresTicks, 0)
	// The window's wall time is from the first write; the readings from just before it.
	r.othersBusy = float64(max(others, 0)) / float64(ticks) / r.window.Seconds() / float64(len(busyAfter))
	if pid != 0 {
		if r.end, err = procstat.ReadMemory(pid); err != nil {
			return nil, err
		}
		r.serverThreads = procstat.Threads(pid)
	}
	if ws != nil {
		ws.close()
		r.collect(ws, acks, seqs)
	}
	return r, nil
}

// collect adds up what the watchers saw, once they have stopped.
func (r *phaseResult) collect(ws *watchers, acks, seqs []atomic.Int64) {
	r.expected = int64(len(ws.list)) * int64(r.writes.acked)
	r.endedByConn = make([]int, len(ws.clients))
	r.slowestWatcherReceived = -1
	for _, w := range ws.list {
		got := w.received.Load()
		r.received += got
		if r.slowestWatcherReceived < 0 || got < r.slowestWatcherReceived {
			r.slowestWatcherReceived = got
		}
		r.fastestWatcherReceived = max(r.fastestWatcherReceived, got)
		r.duplicates += w.duplicates
		r.outOfOrder += w.outOfOrder
		r.foreign += w.foreign
		r.early += w.early
		r.heartbeats += w.heartbeats
		if w.firstNotHeartbeat {
			r.firstNotHeartbeat++
		}
		r.fromSend.merge(&w.fromSend)
		r.fromAck.merge(&w.fromAck)
		// A write the watcher did not receive is lost if the stream went on past its sequence (or
		// never ended); after the end of a stream the server cut, it is only undelivered: a client
		// would resume after the last sequence it read and get it then.
		for i := range acks {
			seen := w.seen[i/64]&(1<<(i%64)) != 0
			switch acked := acks[i].Load() != 0; {
			case acked && !seen && w.err != nil && (seqs[i].Load() == 0 || seqs[i].Load() > w.lastSequence):
				r.undelivered++
			case acked && !seen:
				r.lost++
			case !acked && seen:
				r.notAcked++
			}
		}
		if w.err != nil {
			r.endedByConn[w.conn]++
			r.ended++
			r.endErrors[w.err.Error()]++
			if d := w.endedAt.Sub(r.writes.first); r.ended == 1 || d < r.firstEnd {
				r.firstEnd = d
			}
		}
		if t := time.Unix(0, w.lastReceived); w.lastReceived != 0 && t.Sub(r.writes.lastAck) > r.lastDelivery {
			r.lastDelivery = t.Sub(r.writes.lastAck)
		}
	}
}

func randomKey() string {
	var b [16]byte
	rand.Read(b[:])
	return "watchload-" + hex.EncodeToString(b[:])
}

func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// waitQuiet waits, up to wait, until every CPU has been under 10% busy for half a second.
func waitQuiet(wait time.Duration, ticks int64) {
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		before, err := procstat.CPUBusy()
		if err != nil {
			return
		}
		time.Sleep(500 * time.Millisecond)
		after, err := procstat.CPUBusy()
		if err != nil {
			return
		}
		quiet := true
		for cpu, b := range after {
			if float64(b-before[cpu])/float64(ticks)/0.5 > 0.10 {
				quiet = false
			}
		}
		if quiet {
			return
		}
	}
	progress("the machine did not get quiet within %s; going on", wait)
}

// serverConns counts the established TCP connections to addr's port (/proc/net/tcp and tcp6).
func serverConns(addr string) int {
	_, port, ok := strings.Cut(addr, ":")
	if !ok {
		return 0
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return 0
	}
	want := fmt.Sprintf(":%04X", p)
	n := 0
	for _, file := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(file)
		if err != nil {
			continue
		}
		for line := range strings.Lines(string(b)) {
			f := strings.Fields(line)
			if len(f) > 3 && strings.HasSuffix(f[1], want) && f[3] == "01" {
				n++
			}
		}
	}
	return n
}

// report prints the Markdown table of the phases, and says whether every check passed.
func report(o options, rs []*phaseResult, ticks int64) bool {
	cpu := func(t int64) float64 { return float64(t) / float64(ticks) }
	pct := func(t int64, r *phaseResult) string {
		return fmt.Sprintf("%.2f s (%.0f%% of one CPU)", cpu(t), 100*cpu(t)/r.window.Seconds())
	}
	mib := func(kib int64) string { return fmt.Sprintf("%.1f MiB", float64(kib)/1024) }
	lat := func(h *hist) string {
		return fmt.Sprintf("%s / %s / %s / %s", ms(h.quantile(0.5)), ms(h.quantile(0.9)), ms(h.quantile(0.99)), ms(h.max))
	}
	store := "SQLite (a fresh file per phase)"
	if o.db != "" {
		store = "PostgreSQL (a fresh schema per phase)"
	}
	if o.addr != "" {
		store = "the server at " + o.addr
	}
	fanOut := fmt.Sprintf("%d watchers (%d a connection)", o.watchers, o.perConn)
	if o.webhooks > 0 {
		fanOut = fmt.Sprintf("%d webhook subscriptions (the \"watchers\" below), to a receiver in watchload", o.webhooks)
	}
	fmt.Printf("\n- watchload: %s, %.0f creates/s for %s, %d writers; %s\n", fanOut, o.rate, o.duration, o.writers, store)
	serverCPUs := fmt.Sprintf("on CPUs %q", o.serverCPUs)
	if o.addr != "" {
		serverCPUs = "not started here"
	}
	fmt.Printf("- usersd %s, watchload on CPUs %q; CPU times from /proc/PID/stat over the window from the first write to the last event (or ack)\n\n",
		serverCPUs, o.clientCPUs)
	head := "| |"
	sep := "|---|"
	for _, r := range rs {
		head += fmt.Sprintf(" %s: %s watchers |", r.name, thousands(int64(r.watchers)))
		sep += "---:|"
	}
	fmt.Println(head)
	fmt.Println(sep)
	row := func(label string, cell func(r *phaseResult) string) {
		line := "| " + label + " |"
		for _, r := range rs {
			line += " " + cell(r) + " |"
		}
		fmt.Println(line)
	}
	watchOnly := func(f func(r *phaseResult) string) func(r *phaseResult) string {
		return func(r *phaseResult) string {
			if r.watchers == 0 {
				return "–"
			}
			return f(r)
		}
	}
	row("HTTP/2 connections of the watchers; time until every first heartbeat", watchOnly(func(r *phaseResult) string {
		return fmt.Sprintf("%d; %s", r.conns, ms(r.opened))
	}))
	row("creates acknowledged / due (failed; not sent, too far behind)", func(r *phaseResult) string {
		s := fmt.Sprintf("%s / %s (%d; %s)", thousands(int64(r.writes.acked)), thousands(int64(r.writes.planned)), r.writes.failed, thousands(int64(r.writes.skipped)))
		if len(r.writes.failures) > 0 {
			s += fmt.Sprintf(" %v", r.writes.failures)
		}
		return s
	})
	row("creates a second, achieved", func(r *phaseResult) string {
		return fmt.Sprintf("%.0f", float64(r.writes.acked)/r.writes.lastAck.Sub(r.writes.first).Seconds())
	})
	row("create latency p50 / p99 (latest start behind the pace)", func(r *phaseResult) string {
		return fmt.Sprintf("%s / %s (%s)", ms(r.writes.latency.quantile(0.5)), ms(r.writes.latency.quantile(0.99)), ms(r.writes.maxLag))
	})
	row("events delivered / expected (watchers × acknowledged creates)", watchOnly(func(r *phaseResult) string {
		return fmt.Sprintf("%s / %s", thousands(r.received), thousands(r.expected))
	}))
	row("events a watcher received: fewest / most", watchOnly(func(r *phaseResult) string {
		return fmt.Sprintf("%s / %s", thousands(r.slowestWatcherReceived), thousands(r.fastestWatcherReceived))
	}))
	row("lost / duplicate / out of order / not ours", watchOnly(func(r *phaseResult) string {
		return fmt.Sprintf("%s / %d / %d / %d", thousands(r.lost), r.duplicates, r.outOfOrder, r.foreign)
	}))
	if slices.ContainsFunc(rs, func(r *phaseResult) bool { return r.notAcked != 0 }) {
		row("events of creates that failed or went unanswered (committed all the same)", watchOnly(func(r *phaseResult) string { return thousands(r.notAcked) }))
	}
	if o.webhooks > 0 {
		row("webhook deliveries that overlapped another of their subscription", watchOnly(func(r *phaseResult) string { return thousands(r.overlapping.Load()) }))
	}
	row("undelivered after the end of a stream the server cut", watchOnly(func(r *phaseResult) string { return thousands(r.undelivered) }))
	row("streams ended by the server", watchOnly(func(r *phaseResult) string {
		if r.ended == 0 {
			return "0"
		}
		return fmt.Sprintf("%d (first %s after the first write; by connection %v): %v", r.ended, ms(r.firstEnd), r.endedByConn, r.endErrors)
	}))
	row("delivery latency from send: p50 / p90 / p99 / max", watchOnly(func(r *phaseResult) string { return lat(&r.fromSend) }))
	row("delivery latency from ack: p50 / p90 / p99 / max", watchOnly(func(r *phaseResult) string { return lat(&r.fromAck) }))
	row("events that arrived before their create's answer", watchOnly(func(r *phaseResult) string {
		return fmt.Sprintf("%.1f%%", 100*float64(r.early)/float64(max(r.received, 1)))
	}))
	row("last event after the last ack", watchOnly(func(r *phaseResult) string { return ms(r.lastDelivery) }))
	row("window (first write to last ack or event)", func(r *phaseResult) string { return fmt.Sprintf("%.2f s", r.window.Seconds()) })
	row("usersd CPU in the window", func(r *phaseResult) string { return pct(r.serverTicks, r) })
	if o.db != "" {
		row("PostgreSQL backends' CPU in the window", func(r *phaseResult) string { return pct(r.postgresTicks, r) })
	}
	row("watchload's own CPU in the window", func(r *phaseResult) string { return pct(r.clientTicks, r) })
	row("other processes, average share of each CPU", func(r *phaseResult) string { return fmt.Sprintf("%.0f%%", 100*r.othersBusy) })
	row("usersd RSS before the writes / at the end", func(r *phaseResult) string { return mib(r.idle.RSS) + " / " + mib(r.end.RSS) })
	row("usersd peak RSS (VmHWM)", func(r *phaseResult) string { return mib(r.end.HWM) })
	row("usersd threads at the end", func(r *phaseResult) string { return strconv.Itoa(r.serverThreads) })
	fmt.Println()

	i := slices.IndexFunc(rs, func(r *phaseResult) bool { return r.watchers == 0 })
	j := slices.IndexFunc(rs, func(r *phaseResult) bool { return r.watchers > 0 })
	if i >= 0 && j >= 0 {
		base, watch := rs[i], rs[j]
		// Both phases make the same creates, so their CPU times compare as they are; per create in
		// case some failed.
		with := cpu(watch.serverTicks) / float64(max(watch.writes.acked, 1))
		without := cpu(base.serverTicks) / float64(max(base.writes.acked, 1))
		extra := cpu(watch.serverTicks) - without*float64(watch.writes.acked)
		fmt.Printf("- usersd CPU with watchers / without, for the same creates: %.1fx (%.0f vs %.0f µs a create)\n", with/without, with*1e6, without*1e6)
		fmt.Printf("- usersd CPU per delivered event: (CPU with − CPU without) / events delivered = (%.2f − %.2f s) / %s = %.2f µs\n",
			cpu(watch.serverTicks), without*float64(watch.writes.acked), thousands(watch.received), extra*1e6/float64(max(watch.received, 1)))
		if watch.postgresTicks >= 0 && base.postgresTicks >= 0 {
			fmt.Printf("- PostgreSQL backends' CPU with watchers / without: %.2f vs %.2f s\n", cpu(watch.postgresTicks), cpu(base.postgresTicks))
		}
		fmt.Printf("- watchload's own CPU per delivered event: %.2f µs\n", cpu(watch.clientTicks)*1e6/float64(max(watch.received, 1)))
		fmt.Printf("- usersd RSS per watcher, before the writes: (%s − %s) / %d = %.1f KiB\n",
			mib(watch.idle.RSS), mib(base.idle.RSS), watch.watchers, float64(watch.idle.RSS-base.idle.RSS)/float64(watch.watchers))
	}
	var failures []string
	for _, r := range rs {
		add := func(n int64, what string) {
			if n != 0 {
				failures = append(failures, fmt.Sprintf("%s: %s %s", r.name, thousands(n), what))
			}
		}
		add(int64(r.writes.failed), "creates failed")
		add(int64(r.writes.skipped), "creates not sent, too far behind the pace")
		if r.watchers == 0 {
			continue
		}
		add(r.lost, "events lost")
		add(r.duplicates, "events duplicated")
		add(r.outOfOrder, "events out of order")
		add(r.overlapping.Load(), "webhook deliveries that overlapped another of their subscription")
		add(int64(r.ended), "streams ended by the server")
		add(int64(r.firstNotHeartbeat), "streams whose first message was not a heartbeat")
		if !r.drained {
			failures = append(failures, fmt.Sprintf("%s: not every live watcher had every event %s after the last write", r.name, o.drain))
		}
	}
	ok := len(failures) == 0
	if ok {
		fmt.Println("- every watcher received every acknowledged create exactly once, in order; no stream ended; every create was sent on time and answered")
	} else {
		fmt.Println("- **FAILED**: " + strings.Join(failures, "; "))
	}
	return ok
}

func ms(d time.Duration) string {
	switch {
	case d >= 10*time.Second:
		return fmt.Sprintf("%.1f s", d.Seconds())
	case d >= time.Second:
		return fmt.Sprintf("%.2f s", d.Seconds())
	case d >= 10*time.Millisecond:
		return fmt.Sprintf("%.1f ms", float64(d)/1e6)
	default:
		return fmt.Sprintf("%.2f ms", float64(d)/1e6)
	}
}

func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 && s[i-1] != '-' {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
