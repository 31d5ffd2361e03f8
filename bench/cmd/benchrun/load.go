package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	usersv1 "usersd/gen/users/v1"
)

// load is a load generator run against one server, pinned to CPU 1.
type load interface {
	// run puts load on addr for d and says what it measured. out is a scratch folder.
	run(r *runner, addr string, d time.Duration, out string) (result, error)
	describe() string
}

// result is what one load run measured, from the load generator's side.
type result struct {
	requests   int64   // completed requests
	rps        float64 // completed requests per second
	p50, p99   time.Duration
	errors     int64 // connection errors and timeouts
	badStatus  int64 // answers with a status outside 2xx (wrk: outside 2xx and 3xx)
	s2xx, s5xx int64 // counted only by scenarios that ask for it; -1 otherwise
	clientCPU  time.Duration
	wall       time.Duration
}

// runClient runs a load generator pinned to CPU 1 and returns its output and the CPU it used.
func runClient(env []string, name string, args ...string) (stdout []byte, cpu, wall time.Duration, err error) {
	cmd := exec.Command("taskset", append([]string{"-c", "1", name}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	start := time.Now()
	err = cmd.Run()
	wall = time.Since(start)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("%s: %v\n%s%s", name, err, out.Bytes(), errOut.Bytes())
	}
	cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	return out.Bytes(), cpu, wall, nil
}

// seconds is d in whole seconds for the load generators' flags, at least one.
func seconds(d time.Duration) string {
	return strconv.Itoa(max(1, int(d.Round(time.Second)/time.Second))) + "s"
}

// wrkLoad is wrk on HTTP/1.1, one thread, with bench/wrk/bench.lua.
type wrkLoad struct {
	conns  int
	method string // GET when empty
	path   string // "{id}" is replaced by ids 1..ids in turn (times step); "{cursor}" by the run's page token
	body   string // JSON; "{id}" as in path
	ids    int
	step   int // 0 or 1: ids 1, 2, 3...; n: ids n, 2n, 3n... spread over a large collection
	// key sends the API key; countStatus counts answers by status class (2xx, 5xx...).
	key, countStatus bool
}

func (w wrkLoad) describe() string { return fmt.Sprintf("wrk, HTTP/1.1, %d conns", w.conns) }

// withCursor puts the run's page token into a path.
func withCursor(path, cursor string) string {
	return strings.ReplaceAll(path, "{cursor}", url.QueryEscape(cursor))
}

// benchLine is the line that bench.lua prints when wrk is done.
var benchLine = regexp.MustCompile(`(?m)^BENCH (.*)$`)

func (w wrkLoad) run(r *runner, addr string, d time.Duration, _ string) (result, error) {
	env := []string{
		"BENCH_METHOD=" + orDefault(w.method, "GET"), "BENCH_PATH=" + withCursor(w.path, r.cursor), "BENCH_IDS=" + strconv.Itoa(w.ids),
		"BENCH_ID_STEP=" + strconv.Itoa(max(w.step, 1)),
	}
	if w.body != "" {
		env = append(env, "BENCH_BODY="+w.body)
	}
	if w.key {
		env = append(env, "BENCH_API_KEY="+apiKey)
	}
	if w.countStatus {
		env = append(env, "BENCH_STATUS=1")
	}
	out, cpu, wall, err := runClient(env, "wrk", "-t1", "-c"+strconv.Itoa(w.conns), "-d"+seconds(d),
		"--timeout", "30s", "-s", r.wrkScript, "http://"+addr)
	if err != nil {
		return result{}, err
	}
	m := benchLine.FindSubmatch(out)
	if m == nil {
		return result{}, fmt.Errorf("wrk printed no BENCH line:\n%s", out)
	}
	kv := map[string]int64{}
	for _, field := range strings.Fields(string(m[1])) {
		k, v, _ := strings.Cut(field, "=")
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return result{}, fmt.Errorf("wrk: bad field %q", field)
		}
		kv[k] = n
	}
	res := result{
		requests: kv["requests"], p50: time.Duration(kv["p50_us"]) * time.Microsecond, p99: time.Duration(kv["p99_us"]) * time.Microsecond,
		errors: kv["errors"] + kv["timeouts"], badStatus: kv["non2xx3xx"], s2xx: -1, s5xx: -1, clientCPU: cpu, wall: wall,
	}
	if us := kv["duration_us"]; us > 0 {
		res.rps = float64(res.requests) / (float64(us) / 1e6)
	}
	if w.countStatus {
		res.s2xx, res.s5xx = kv["s2xx"], kv["s5xx"]
		res.badStatus = kv["s4xx"] + kv["s5xx"] + kv["sother"] // 3xx is wrong here too
	}
	return res, nil
}

func orDefault(s, fallback string) string {
	if s == "" {
		return fallback
	}
	return s
}

// h2loadLoad is h2load on h2c (HTTP/2 with prior knowledge), one thread.
type h2loadLoad struct {
	conns, streams int
	path           string
	// grpc sends a gRPC-framed GetUserRequest for user grpcUserID as the body of every request;
	// json, when set, is POSTed as application/json instead. Neither: GET.
	grpc bool
	json string
}

func (h h2loadLoad) describe() string {
	return fmt.Sprintf("h2load, h2c, %d conns x %d streams", h.conns, h.streams)
}

var (
	h2loadFinished = regexp.MustCompile(`finished in ([0-9.]+)s, ([0-9.]+) req/s`)
	h2loadRequests = regexp.MustCompile(`requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout`)
	h2loadStatus   = regexp.MustCompile(`status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx`)
)

func (h h2loadLoad) run(r *runner, addr string, d time.Duration, out string) (result, error) {
	logFile := filepath.Join(out, "h2load.log")
	defer os.Remove(logFile)
	args := []string{"-t1", "-c" + strconv.Itoa(h.conns), "-m" + strconv.Itoa(h.streams), "-D", seconds(d), "--log-file=" + logFile}
	if h.grpc {
		body := filepath.Join(out, "grpc-body.bin")
		if err := writeGRPCBody(body, grpcUserID); err != nil {
			return result{}, err
		}
		args = append(args, "-H", "content-type: application/grpc", "-H", "te: trailers", "-d", body)
	}
	if h.json != "" {
		body := filepath.Join(out, "body.json")
		if err := os.WriteFile(body, []byte(h.json), 0o644); err != nil {
			return result{}, err
		}
		args = append(args, "-H", "content-type: application/json", "-d", body)
	}
	stdout, cpu, wall, err := runClient(nil, "h2load", append(args, "http://"+addr+h.path)...)
	if err != nil {
		return result{}, err
	}
	finished, requests, status := h2loadFinished.FindSubmatch(stdout), h2loadRequests.FindSubmatch(stdout), h2loadStatus.FindSubmatch(stdout)
	if finished == nil || requests == nil || status == nil {
		return result{}, fmt.Errorf("cannot read h2load's summary:\n%s", stdout)
	}
	num := func(b []byte) int64 { n, _ := strconv.ParseInt(string(b), 10, 64); return n }
	rps, _ := strconv.ParseFloat(string(finished[2]), 64)
	res := result{
		rps: rps, errors: num(requests[5]) + num(requests[6]) + num(requests[7]),
		badStatus: num(status[2]) + num(status[3]) + num(status[4]), s2xx: -1, s5xx: -1, clientCPU: cpu, wall: wall,
	}
	// h2load gives only the mean and deviation of request times; percentiles come from its log of
	// every request.
	res.requests, res.p50, res.p99, err = h2loadLatencies(logFile)
	return res, err
}

// h2loadLatencies reads h2load's --log-file (one request a line: start time in µs since the epoch,
// HTTP status, µs until the end of the response) and returns the count and nearest-rank p50 and p99.
func h2loadLatencies(path string) (n int64, p50, p99 time.Duration, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, 0, err
	}
	defer f.Close()
	var us []int64
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		fields := strings.Fields(lines.Text())
		if len(fields) != 3 {
			continue
		}
		d, err := strconv.ParseInt(fields[2], 10, 64)
		if err != nil {
			return 0, 0, 0, fmt.Errorf("h2load log: bad line %q", lines.Text())
		}
		us = append(us, d)
	}
	if err := lines.Err(); err != nil {
		return 0, 0, 0, err
	}
	slices.Sort(us)
	return int64(len(us)), time.Duration(percentile(us, 50)) * time.Microsecond, time.Duration(percentile(us, 99)) * time.Microsecond, nil
}

// percentile is the nearest-rank percentile of sorted values; 0 for none.
func percentile(sorted []int64, p float64) int64 {
	if len(sorted) == 0 {
		return 0
	}
	rank := int((p/100)*float64(len(sorted))+0.999999) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}

// writeGRPCBody writes one gRPC message frame: a flag byte (0: not compressed), the message length
// as 4 bytes big-endian, then the binary GetUserRequest.
func writeGRPCBody(path string, id int32) error {
	msg, err := proto.Marshal(&usersv1.GetUserRequest{Id: id})
	if err != nil {
		return err
	}
	frame := make([]byte, 5, 5+len(msg))
	binary.BigEndian.PutUint32(frame[1:], uint32(len(msg)))
	return os.WriteFile(path, append(frame, msg...), 0o644)
}
