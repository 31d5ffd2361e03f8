package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"usersd/internal/proctest"

	"golang.org/x/net/http2"
)

// idleConnections is how many keep-alive connections the idle test holds open on each server: half
// HTTP/1.1 after one request, half h2c after the preface and the settings exchange.
const idleConnections = 10_000

// bareServerEnv makes the test binary serve as the bare net/http server that the idle test compares
// usersd with (see TestMain).
const bareServerEnv = "USERSD_TEST_BARE_SERVER"

// serveBare is a net/http server with the defaults, HTTP/1.1 and h2c on one port, answering
// /health: what any Go service pays for a connection. It prints its address and serves until killed.
func serveBare() {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"status":"SERVING"}`)
	})
	mux.Handle("GET /debug/pprof/goroutine", pprof.Handler("goroutine"))
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	fmt.Println(l.Addr())
	fmt.Fprintln(os.Stderr, (&http.Server{Handler: mux, Protocols: &protocols}).Serve(l))
	os.Exit(1)
}

// idleCost is what a server process holds with the idle connections open.
type idleCost struct {
	rssKiB, baseRSSKiB         int64 // with the connections open, and before
	goroutines, baseGoroutines int
	before, during             time.Duration // p50 of GET /health on a connection of its own
}

func TestTenThousandIdleConnectionsCostLittleMoreThanABareServer(t *testing.T) {
	needOpenFiles(t, idleConnections+1000)
	// Both servers collect garbage early, so that what their RSS shows is what the connections
	// hold, not the garbage of setting them up: how much of that a process still has depends on
	// where its collector stood, which a machine busy with other tests moves by tens of MiB.
	t.Setenv("GOGC", "25")
	adminAddr := proctest.FreeLoopbackAddr(t)
	cmd, s, _ := startProcess(t, filepath.Join(t.TempDir(), "users.db"), "-admin-addr", adminAddr)
	usersd := holdIdleConnections(t, cmd, s.BaseURL, "http://"+adminAddr)

	bare := exec.Command(os.Args[0], "-test.run=^$")
	bare.Env = append(os.Environ(), bareServerEnv+"=1")
	out, err := bare.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := bare.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bare.Process.Kill(); bare.Wait() })
	addr, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("the bare server did not print its address: %v", err)
	}
	baseURL := "http://" + strings.TrimSpace(addr)
	base := holdIdleConnections(t, bare, baseURL, baseURL)

	t.Logf("%d idle connections: usersd RSS %.0f MiB (%.0f before), %d goroutines (%d before), /health p50 %s before, %s during",
		idleConnections, kib(usersd.rssKiB), kib(usersd.baseRSSKiB), usersd.goroutines, usersd.baseGoroutines, usersd.before, usersd.during)
	t.Logf("%d idle connections: bare net/http RSS %.0f MiB (%.0f before), %d goroutines (%d before), /health p50 %s before, %s during",
		idleConnections, kib(base.rssKiB), kib(base.baseRSSKiB), base.goroutines, base.baseGoroutines, base.before, base.during)
	ratio := float64(usersd.rssKiB) / float64(base.rssKiB)
	t.Logf("RSS ratio usersd / bare: %.2f", ratio)
	if ratio > 1.25 {
		t.Errorf("usersd holds %.0f MiB with %d idle connections, %.2fx the bare server's %.0f MiB; want at most 1.25x",
			kib(usersd.rssKiB), idleConnections, ratio, kib(base.rssKiB))
	}
	// Goroutines per connection are net/http's own (one per HTTP/1.1 connection, two per HTTP/2
	// one); usersd may add a fixed few (its sweeper, the debug listener), never one per connection.
	if extra := usersd.goroutines - usersd.baseGoroutines - (base.goroutines - base.baseGoroutines); extra > 50 {
		t.Errorf("the idle connections added %d goroutines to usersd, %d more than to the bare server",
			usersd.goroutines-usersd.baseGoroutines, extra)
	}
}

func kib(n int64) float64 { return float64(n) / 1024 }

// holdIdleConnections opens the idle connections to baseURL, measures what proc holds then, stops
// proc, and closes them. The server goes first, so that the closed connections wait out TIME_WAIT on
// its side of the loopback rather than taking the client's ephemeral ports.
func holdIdleConnections(t *testing.T, proc *exec.Cmd, baseURL, debugURL string) idleCost {
	t.Helper()
	var cost idleCost
	cost.before = healthP50(t, baseURL)
	cost.baseRSSKiB, cost.baseGoroutines = rssKiB(t, proc.Process.Pid), goroutines(t, debugURL)
	addr := strings.TrimPrefix(baseURL, "http://")
	conns := make([]net.Conn, 0, idleConnections)
	defer func() {
		proc.Process.Signal(syscall.SIGKILL)
		proc.Wait()
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := range idleConnections {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		conns = append(conns, c)
		c.SetDeadline(time.Now().Add(10 * time.Second))
		if i%2 == 0 {
			err = oneHTTP1Request(c)
		} else {
			err = h2cPrefaceAndSettings(c)
		}
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		c.SetDeadline(time.Time{})
	}
	time.Sleep(time.Second) // let the server finish with what the last connections sent
	cost.during = healthP50(t, baseURL)
	cost.rssKiB, cost.goroutines = rssKiB(t, proc.Process.Pid), goroutines(t, debugURL)
	return cost
}

// oneHTTP1Request sends GET /health on c and reads the whole answer, leaving c idle and kept alive.
func oneHTTP1Request(c net.Conn) error {
	if _, err := io.WriteString(c, "GET /health HTTP/1.1\r\nHost: usersd\r\n\r\n"); err != nil {
		return err
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if _, err := io.Copy(io.Discard, res.Body); err != nil {
		return err
	}
	if res.StatusCode != http.StatusOK || res.Close {
		return fmt.Errorf("GET /health: %s, close %t", res.Status, res.Close)
	}
	return nil
}

// h2cPrefaceAndSettings opens HTTP/2 on c with prior knowledge and waits for the server's settings,
// so that the server has taken the connection as HTTP/2 before c goes idle.
func h2cPrefaceAndSettings(c net.Conn) error {
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		return err
	}
	framer := http2.NewFramer(c, c)
	if err := framer.WriteSettings(); err != nil {
		return err
	}
	for {
		f, err := framer.ReadFrame()
		if err != nil {
			return err
		}
		if s, ok := f.(*http2.SettingsFrame); ok && !s.IsAck() {
			return framer.WriteSettingsAck()
		}
	}
}

// healthP50 is the median time of 200 GETs of /health, one after another on one connection.
func healthP50(t *testing.T, baseURL string) time.Duration {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}, Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	var took []time.Duration
	for range 200 {
		start := time.Now()
		res, err := client.Get(baseURL + "/health")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("GET /health: %s", res.Status)
		}
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	return took[len(took)/2]
}

// rssKiB reads the resident set size of a process from /proc.
func rssKiB(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS: %v", err)
			}
			return n
		}
	}
	t.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}

// goroutines reads a Go server's goroutine count from its profiler.
func goroutines(t *testing.T, debugURL string) int {
	t.Helper()
	res, err := http.Get(debugURL + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	line, _ := bufio.NewReader(res.Body).ReadString('\n')
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "goroutine profile: total ")))
	if err != nil {
		t.Fatalf("goroutine profile starts %q: %v", line, err)
	}
	return n
}

// needOpenFiles fails the test, saying what to change, if this process may not open n files: the
// client ends of the idle connections are all here.
func needOpenFiles(t *testing.T, n uint64) {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Cur < n {
		t.Fatalf("this test opens %d connections but may open only %d files: raise the limit (ulimit -n %d)", idleConnections, lim.Cur, n)
	}
}
