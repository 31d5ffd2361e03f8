package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// info describes the run for the report's header.
type info struct {
	date, command, commit, cpu, kernel, goVersion, wrk, h2load string
	postgres                                                   string // the server's version, when a scenario ran on it
	cpus                                                       int
	rounds                                                     int
	duration, warmup, quietWait                                time.Duration
	quietBusy, maxOther                                        float64
	retries                                                    int
}

func machineInfo(r *runner, command, commit string) info {
	i := info{
		date: time.Now().UTC().Format("2006-01-02 15:04 UTC"), command: command, commit: commit,
		cpus: runtime.NumCPU(), goVersion: runtime.Version(), rounds: r.rounds, duration: r.duration, warmup: r.warmup,
		quietWait: r.quietWait, quietBusy: r.quietBusy, maxOther: r.maxOther, retries: r.retries,
	}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		lines := bufio.NewScanner(f)
		for lines.Scan() {
			if k, v, ok := strings.Cut(lines.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				i.cpu = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		i.kernel = strings.TrimSpace(string(b))
	}
	firstLine := func(name string, args ...string) string {
		out, _ := exec.Command(name, args...).CombinedOutput()
		line, _, _ := strings.Cut(string(out), "\n")
		return strings.TrimSpace(line)
	}
	i.wrk = firstLine("wrk", "-v")
	i.wrk, _, _ = strings.Cut(i.wrk, " Copyright")
	i.h2load = firstLine("h2load", "--version")
	return i
}

// writeTSV writes every run, one a line, for a later look at the spread.
func writeTSV(path string, records []record) error {
	var b strings.Builder
	b.WriteString("round\tscenario\treq_per_s\tp50_us\tp99_us\tcpu_us_per_req\tdb_cpu_us_per_req\tpeak_rss_kib\trequests\terrors\tbad_status\tother_cpu_pct\tclient_cpu_pct\tload1\twaited_s\tquiet\tattempts\tnote\terror\n")
	for _, r := range records {
		errText := ""
		if r.err != nil {
			errText = strings.Join(strings.Fields(r.err.Error()), " ")
		}
		fmt.Fprintf(&b, "%d\t%s\t%.1f\t%d\t%d\t%.2f\t%.2f\t%d\t%d\t%d\t%d\t%.1f\t%.1f\t%s\t%.1f\t%t\t%d\t%s\t%s\n",
			r.round, r.scenario, r.res.rps, r.res.p50.Microseconds(), r.res.p99.Microseconds(), r.cpuPerReq, r.dbCPUPerReq, r.rssKiB,
			r.res.requests, r.res.errors, r.res.badStatus, r.otherCPU, r.clientCPU, r.load1, r.waited.Seconds(), r.quiet, r.attempts, r.note, errText)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// summary is one scenario across its rounds.
type summary struct {
	sc                  scenario
	runs, failed        int
	rps, p50, p99, cpu  float64 // medians; latencies in µs
	dbCPU               float64 // median PostgreSQL CPU µs/req
	rssKiB              int64   // the highest peak of any round
	rpsRounds           []float64
	otherCPU, clientCPU float64 // the highest of any round
	errors, badStatus   int64
	repeated, disturbed int // runs repeated because of other work; kept runs still disturbed
	notes               []string
	ratios              []ratio
	errText             string
}

// ratio is one comparison of a scenario's medians with another scenario's.
type ratio struct {
	comparison
	value float64
	met   bool
	label string // "1.20x the p50 of list-sorted-1k"
}

func median(values []float64) float64 {
	if len(values) == 0 {
		return 0
	}
	s := slices.Clone(values)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func summarize(todo []scenario, records []record, maxOther float64) map[string]*summary {
	out := map[string]*summary{}
	for _, sc := range todo {
		s := &summary{sc: sc}
		var p50, p99, cpu, dbCPU []float64
		for _, r := range records {
			if r.scenario != sc.id {
				continue
			}
			s.runs++
			s.repeated += r.attempts - 1
			if r.err != nil {
				s.failed++
				s.errText = r.err.Error()
				continue
			}
			s.rpsRounds = append(s.rpsRounds, r.res.rps)
			p50 = append(p50, float64(r.res.p50.Microseconds()))
			p99 = append(p99, float64(r.res.p99.Microseconds()))
			cpu = append(cpu, r.cpuPerReq)
			dbCPU = append(dbCPU, r.dbCPUPerReq)
			s.rssKiB = max(s.rssKiB, r.rssKiB)
			s.otherCPU, s.clientCPU = max(s.otherCPU, r.otherCPU), max(s.clientCPU, r.clientCPU)
			if r.otherCPU > maxOther {
				s.disturbed++
			}
			s.errors += r.res.errors
			s.badStatus += r.res.badStatus
			if r.note != "" {
				s.notes = append(s.notes, r.note)
			}
		}
		s.rps, s.p50, s.p99, s.cpu, s.dbCPU = median(s.rpsRounds), median(p50), median(p99), median(cpu), median(dbCPU)
		out[sc.id] = s
	}
	for _, s := range out {
		for _, c := range s.sc.compares {
			base, ok := out[c.against]
			if !ok || len(s.rpsRounds) == 0 || len(base.rpsRounds) == 0 {
				continue
			}
			rt := ratio{comparison: c}
			if c.byLatency {
				rt.value = s.p50 / base.p50
				rt.met = rt.value <= c.target
				rt.label = fmt.Sprintf("%.2fx the p50 of %s", rt.value, base.sc.id)
			} else {
				rt.value = s.rps / base.rps
				rt.met = rt.value >= c.target
				rt.label = fmt.Sprintf("%.2fx the req/s of %s", rt.value, base.sc.id)
			}
			s.ratios = append(s.ratios, rt)
		}
	}
	return out
}

// reportMarkdown is the report: the header, the table of medians, the targets, the data sets, and
// every round.
func reportMarkdown(i info, todo []scenario, records []record, data string) string {
	sums := summarize(todo, records, i.maxOther)
	var b strings.Builder
	fmt.Fprintf(&b, "## usersd benchmark, %s\n\n", i.date)
	fmt.Fprintf(&b, "- command: `%s`; commit %s\n", i.command, i.commit)
	fmt.Fprintf(&b, "- machine: %d CPUs, %s, Linux %s; %s; %s; %s\n", i.cpus, i.cpu, i.kernel, i.goVersion, i.wrk, i.h2load)
	if i.postgres != "" {
		fmt.Fprintf(&b, "- PostgreSQL %s, on the same machine and not pinned: its processes run on either CPU, so \"DB CPU\" shows what they spent per request beside usersd's own\n", i.postgres)
	}
	fmt.Fprintf(&b, "- %d round(s), each scenario in turn; per run %s of warm-up, then %s measured; server on CPU 0, load generator on CPU 1\n",
		i.rounds, i.warmup, i.duration)
	fmt.Fprintf(&b, "- before each run: up to %s of waiting for both CPUs to be under %.0f%% busy; a run in which other processes took more than %.0f%% of either CPU is repeated, up to %d times\n\n",
		i.quietWait, i.quietBusy, i.maxOther, i.retries)

	b.WriteString("| Scenario | Load | req/s | p50 | p99 | CPU µs/req | DB CPU µs/req | Peak RSS | Compared with | Target |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---|---|\n")
	for _, sc := range todo {
		s := sums[sc.id]
		if len(s.rpsRounds) == 0 {
			fmt.Fprintf(&b, "| %s | %s | failed | | | | | | | |\n", sc.label, sc.load.describe())
			continue
		}
		var compared, targets []string
		for _, rt := range s.ratios {
			compared = append(compared, rt.label)
			if rt.target > 0 {
				targets = append(targets, fmt.Sprintf("%s %gx: %s", targetOp(rt), rt.target, metWord(rt.met)))
			} else {
				targets = append(targets, "none")
			}
		}
		dbCPU := ""
		if sc.backend == postgres {
			dbCPU = fmt.Sprintf("%.1f", s.dbCPU)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %.1f | %s | %.1f MiB | %s | %s |\n",
			sc.label, sc.load.describe(), fmtCount(s.rps), fmtLatency(us(s.p50)), fmtLatency(us(s.p99)),
			s.cpu, dbCPU, float64(s.rssKiB)/1024, strings.Join(compared, "; "), strings.Join(targets, "; "))
	}

	b.WriteString("\n### Targets\n\n")
	targetLine := func(id, text string) {
		s, ok := sums[id]
		switch {
		case !ok:
		case len(s.ratios) == 0:
			fmt.Fprintf(&b, "- %s: no result (a run failed)\n", text)
		default:
			fmt.Fprintf(&b, "- %s: %.2fx, **%s**\n", text, s.ratios[0].value, metWord(s.ratios[0].met))
		}
	}
	targetLine("rest-get", "REST GET /users/:id vs the net/http baseline (req/s), target >= 0.8x")
	targetLine("connect-get", "Connect JSON GetUser over HTTP/1.1 vs the net/http baseline (req/s), target >= 0.6x")
	targetLine("grpc-get", "gRPC GetUser over h2c vs grpc-go (req/s), target >= 0.35x")
	var peak int64
	var peakAt string
	for _, sc := range todo {
		if s := sums[sc.id]; sc.server == usersd && s.rssKiB > peak {
			peak, peakAt = s.rssKiB, sc.id
		}
	}
	if peak > 0 {
		fmt.Fprintf(&b, "- peak RSS of usersd, the highest of every usersd run: %.1f MiB (in %s), target <= 64 MiB: **%s**\n",
			float64(peak)/1024, peakAt, metWord(peak <= 64*1024))
	}
	// The scale scenarios: each against itself at 1,000 users, and each cursor page against the first
	// page at its size; every list's X-Total-Count and page are checked before and after each run.
	for _, sc := range todo {
		if sc.server != usersd || sc.id == "rest-get" || sc.id == "connect-get" || sc.id == "grpc-get" {
			continue
		}
		s := sums[sc.id]
		for _, c := range sc.compares {
			var rt *ratio
			for i := range s.ratios {
				if s.ratios[i].against == c.against {
					rt = &s.ratios[i]
				}
			}
			measure := "req/s"
			if c.byLatency {
				measure = "p50"
			}
			what := fmt.Sprintf("%s vs %s (%s)", sc.id, c.against, measure)
			switch {
			case rt == nil && sums[c.against] == nil:
				fmt.Fprintf(&b, "- %s: %s not measured in this run\n", what, c.against)
			case rt == nil:
				fmt.Fprintf(&b, "- %s: no result (a run failed)\n", what)
			case c.target > 0:
				fmt.Fprintf(&b, "- %s: %.2fx, target %s %gx: **%s**\n", what, rt.value, targetOp(*rt), c.target, metWord(rt.met))
			default:
				fmt.Fprintf(&b, "- %s: %.2fx (%s)\n", what, rt.value, c.note)
			}
		}
	}
	for _, sc := range todo {
		s := sums[sc.id]
		if !sc.creates {
			continue
		}
		conns := sc.load.(wrkLoad).conns
		if len(s.rpsRounds) == 0 {
			fmt.Fprintf(&b, "- %s, POST /users, %d clients: **failed**: %s\n", sc.id, conns, strings.Join(strings.Fields(s.errText), " "))
			continue
		}
		fmt.Fprintf(&b, "- %s, POST /users, %d clients, %s: %s req/s (median); exact X-Total-Count after the creates, no 5xx and every acknowledged create found after SIGKILL in all %d run(s)",
			sc.id, conns, sc.backend.label(), fmtCount(s.rps), len(s.rpsRounds))
		if s.failed > 0 {
			fmt.Fprintf(&b, ", but %d run(s) **failed**: %s", s.failed, strings.Join(strings.Fields(s.errText), " "))
		}
		b.WriteString("\n")
	}

	b.WriteString(data)

	b.WriteString("\n### Every round\n\n")
	b.WriteString("| Scenario | req/s by round | errors | non-2xx | CPU taken by others (max) | load generator CPU (max) | runs repeated | kept runs still disturbed |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|\n")
	for _, sc := range todo {
		s := sums[sc.id]
		var rounds []string
		for _, r := range records {
			if r.scenario == sc.id {
				if r.err != nil {
					rounds = append(rounds, "failed")
				} else {
					rounds = append(rounds, fmtCount(r.res.rps))
				}
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %.0f%% | %.0f%% | %d | %d of %d |\n",
			sc.id, strings.Join(rounds, " / "), s.errors, s.badStatus, s.otherCPU, s.clientCPU, s.repeated, s.disturbed, s.runs)
	}
	for _, r := range records {
		if r.err != nil {
			fmt.Fprintf(&b, "\nround %d %s failed: %s\n", r.round, r.scenario, strings.Join(strings.Fields(r.err.Error()), " "))
		}
	}
	return b.String()
}

func targetOp(rt ratio) string {
	if rt.byLatency {
		return "<="
	}
	return ">="
}

func metWord(met bool) string {
	if met {
		return "met"
	}
	return "missed"
}

func us(v float64) time.Duration { return time.Duration(v * float64(time.Microsecond)) }

// fmtLatency writes a latency with three significant digits or so, in ms or s.
func fmtLatency(d time.Duration) string {
	switch ms := float64(d) / float64(time.Millisecond); {
	case ms < 10:
		return fmt.Sprintf("%.2f ms", ms)
	case ms < 1000:
		return fmt.Sprintf("%.1f ms", ms)
	default:
		return fmt.Sprintf("%.2f s", ms/1000)
	}
}

// fmtCount writes a rate as a whole number with thousands separated by commas.
func fmtCount(v float64) string {
	s := strconv.FormatInt(int64(v+0.5), 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
