package main

import (
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"usersd/internal/apitest"
	"usersd/internal/proctest"
)

// TestStalledStreamsOfLargePagesStayWithinTheMemoryBudget is the attack of one client with 10
// HTTP/2 connections of 100 streams, each asking for a page of posts of about 1 MB and never
// letting the server send a byte of it (a window of 0). Before the answer budget, every stalled
// answer stayed in memory until the write timeout, about 2 MB of the process's memory each (2 GiB
// in all). With the default budget the binary's peak RSS stays under 512 MiB, the answers past the
// budget are refused with 503, and /health keeps answering throughout, about as fast as it does
// without the attack.
func TestStalledStreamsOfLargePagesStayWithinTheMemoryBudget(t *testing.T) {
	cmd, s, _ := startProcess(t, t.TempDir()+"/users.db")
	user := apitest.IDOf(t, s.CreateUser(t, "poster", "editor"))
	body := strings.Repeat("x", 10_000)
	for i := range 100 {
		resp := s.Do(t, apitest.HTTP1Client, request{Method: "POST", Path: fmt.Sprintf("/users/%d/posts", user), Key: true,
			Header: map[string]string{"Content-Type": "application/json"},
			Body:   fmt.Sprintf(`{"title":"post %d","body":%q}`, i, body)})
		if resp.Status != http.StatusCreated {
			t.Fatalf("create post: %d %s", resp.Status, resp.Body)
		}
	}
	postsPath := fmt.Sprintf("/users/%d/posts?limit=100", user)
	page := s.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: postsPath})
	if page.Status != http.StatusOK || len(page.Body) < 1_000_000 {
		t.Fatalf("the page of posts: %d, %d bytes", page.Status, len(page.Body))
	}

	// /health's baseline: the same checks on the same server without the attack, just before it,
	// so that whatever else the machine runs slows both alike.
	idle := startHealthChecks(s)
	time.Sleep(2 * time.Second)
	idleTook, idleFailures := idle.stop()
	if len(idleFailures) > 0 {
		t.Fatalf("/health failed %d times before the attack, the first: %s", len(idleFailures), idleFailures[0])
	}

	health := startHealthChecks(s)
	const connections, streams = 10, 100
	var mu sync.Mutex
	statuses := map[string]int{}
	var wg sync.WaitGroup
	for range connections {
		c := apitest.DialRawH2C(t, s.BaseURL, 0)
		for range streams {
			c.Get(t, postsPath)
		}
		wg.Go(func() {
			for _, h := range c.ReadHeaders(t, streams, time.Now().Add(60*time.Second)) {
				mu.Lock()
				statuses[h.Get(":status")]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	time.Sleep(2 * time.Second) // the held answers stay held; the refused ones' garbage is collected
	attackTook, healthFailures := health.stop()

	peak := peakRSS(t, cmd.Process.Pid)
	idleMedian, attackMedian := median(idleTook), median(attackTook)
	t.Logf("answers: %v; peak RSS %d MiB; /health without the attack: median %s, slowest %s (%d); during it: median %s, slowest %s (%d)",
		statuses, peak>>20, idleMedian, slices.Max(idleTook), len(idleTook), attackMedian, slices.Max(attackTook), len(attackTook))
	if statuses["200"]+statuses["503"] != connections*streams || statuses["503"] == 0 {
		t.Fatalf("answers %v; want 200s up to the budget and 503s past it", statuses)
	}
	if peak > 512<<20 {
		t.Errorf("peak RSS %d MiB with %d stalled streams; want at most 512 MiB", peak>>20, connections*streams)
	}
	// A check that hangs is one that failed: its client gives up after healthCheckTimeout.
	if len(healthFailures) > 0 {
		t.Errorf("/health failed %d times during the attack, the first: %s", len(healthFailures), healthFailures[0])
	}
	// Not a wall-clock bound, which a machine busy with something else breaks (the slowest /health
	// once took 1.5 s during a compile): the attack may slow the typical check, not make it another
	// order of magnitude. The median passes over the odd check that waits for the rendering of the
	// pages the budget admits; a server whose every check queued behind the stalled answers would
	// fail it.
	if attackMedian > 20*max(idleMedian, time.Millisecond) {
		t.Errorf("/health's median during the attack was %s, %.0fx its %s without it; want at most 20x",
			attackMedian, float64(attackMedian)/float64(idleMedian), idleMedian)
	}
}

// healthCheckTimeout is how long a /health check may take before it counts as failed: a hang
// detector, far above any answer of a live server however busy the machine.
const healthCheckTimeout = 30 * time.Second

// healthChecks asks for /health every 50 ms, on a connection of its own, until stopped.
type healthChecks struct {
	done     chan struct{}
	finished chan struct{}
	took     []time.Duration
	failures []string
}

func startHealthChecks(s *testServer) *healthChecks {
	h := &healthChecks{done: make(chan struct{}), finished: make(chan struct{})}
	go func() {
		defer close(h.finished)
		transport := &http.Transport{}
		defer transport.CloseIdleConnections()
		client := &http.Client{Transport: transport, Timeout: healthCheckTimeout}
		for {
			select {
			case <-h.done:
				return
			case <-time.After(50 * time.Millisecond):
			}
			start := time.Now()
			resp, err := client.Get(s.BaseURL + "/health")
			h.took = append(h.took, time.Since(start))
			if err != nil {
				h.failures = append(h.failures, err.Error())
				continue
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				h.failures = append(h.failures, resp.Status)
			}
		}
	}()
	return h
}

// stop ends the checks and returns how long each took and what failed.
func (h *healthChecks) stop() ([]time.Duration, []string) {
	close(h.done)
	<-h.finished
	return h.took, h.failures
}

// median is the middle of durations (which it sorts), 0 for none.
func median(durations []time.Duration) time.Duration {
	if len(durations) == 0 {
		return 0
	}
	slices.Sort(durations)
	return durations[len(durations)/2]
}

// peakRSS is the most resident memory the process has had (VmHWM), in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		proctest.MissingTool(t, "USERS_REQUIRE_PROCFS", fmt.Sprintf("no /proc to read the process's peak memory from (%v): the test needs Linux", err))
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		if value, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kib, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("VmHWM %q: %v", value, err)
			}
			return kib << 10
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}
