package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"usersd/internal/apitest"
	"usersd/internal/proctest"
)

// TestBatchedCommitsSurviveSIGKILL kills the real binary with SIGKILL five times, each at a random
// moment of a stream of creates from 64 clients at once, so that most commits carry many writes.
// Every create carries an idempotency key, so each is two batched writes (the key, then the user
// with the key's answer). After the last restart every acknowledged create is there exactly once,
// no create is there twice, and every total (all users, and each role) is exact.
func TestBatchedCommitsSurviveSIGKILL(t *testing.T) {
	t.Parallel() // checks what was kept, not how fast: see startProcess
	dbPath := filepath.Join(t.TempDir(), "users.db")
	roles := []string{"", "alpha", "beta", "gamma"}
	var mu sync.Mutex
	acknowledged := map[string]string{} // name -> role, of every create answered 201
	var faults []string
	var commits, batched float64
	for round := range 5 {
		adminAddr := proctest.FreeLoopbackAddr(t)
		cmd, s, _ := startProcess(t, dbPath, "-admin-addr", adminAddr)
		admin := &testServer{Server: apitest.Server{BaseURL: "http://" + adminAddr}}
		ctx, stop := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		for client := range 64 {
			wg.Go(func() {
				for n := 0; ctx.Err() == nil; n++ {
					name := fmt.Sprintf("round %d client %d create %d", round, client, n)
					role := roles[(client+n)%len(roles)]
					status, body, err := createWithKey(ctx, s.BaseURL, name, role)
					mu.Lock()
					switch {
					case err != nil: // the process died under it: in doubt, either outcome is right
					case status == http.StatusCreated:
						acknowledged[name] = role
					default:
						faults = append(faults, fmt.Sprintf("%s: %d %s", name, status, body))
					}
					mu.Unlock()
				}
			})
		}
		time.Sleep(time.Duration(300+rand.IntN(700)) * time.Millisecond)
		// What group commit did, read just before the crash: many writes to a commit.
		families := admin.Metrics(t)
		roundCommits, _ := apitest.Sample(families, "usersd_write_commits_total", nil)
		roundBatched, _ := apitest.Sample(families, "usersd_write_batched_total", nil)
		commits, batched = commits+roundCommits, batched+roundBatched
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		cmd.Wait()
		stop()
		wg.Wait()
		integrityCheck(t, dbPath)
	}
	if len(faults) > 0 {
		t.Fatalf("%d creates were refused, first: %s", len(faults), faults[0])
	}
	if batched <= commits { // the race detector slows requests more than commits, so batches are small there
		t.Fatalf("%.0f commits carried %.0f writes: the load did not batch, so this tested nothing", commits, batched)
	}

	_, s, _ := startProcess(t, dbPath)
	stored := s.ListEveryUser(t)
	seen, roleOf, byRole := map[string]int{}, map[string]string{}, map[string]int{}
	for _, u := range stored {
		name, role := fmt.Sprint(u["name"]), ""
		if r, ok := u["role"].(string); ok { // protojson leaves an empty role out
			role = r
		}
		seen[name]++
		roleOf[name] = role
		byRole[role]++
	}
	for name, n := range seen {
		if n > 1 {
			t.Errorf("%q is there %d times", name, n)
		}
	}
	for name, role := range acknowledged {
		if seen[name] != 1 {
			t.Errorf("the acknowledged create %q is there %d times, want once", name, seen[name])
		} else if got := roleOf[name]; got != role {
			t.Errorf("the acknowledged create %q has role %q, want %q", name, got, role)
		}
	}
	if total := totalCount(t, s, ""); total != len(stored) {
		t.Errorf("X-Total-Count of every user: %d, but %d are listed", total, len(stored))
	}
	for _, role := range roles[1:] {
		if total := totalCount(t, s, role); total != byRole[role] {
			t.Errorf("X-Total-Count of role %q: %d, but %d are listed", role, total, byRole[role])
		}
	}
	t.Logf("5 crashes: %d creates acknowledged, %d users kept (the rest were in doubt); %.0f commits carried %.0f writes (%.1f a commit)",
		len(acknowledged), len(stored), commits, batched, batched/commits)
}

// createWithKey creates a user over REST with an idempotency key of its name.
func createWithKey(ctx context.Context, baseURL, name, role string) (int, string, error) {
	body := fmt.Sprintf(`{"name":%q,"role":%q}`, name, role)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+"/users", strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Api-Key", apitest.Key)
	req.Header.Set("Idempotency-Key", strconv.Quote(name))
	res, err := apitest.HTTP1Client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, string(b), err
}

// totalCount is X-Total-Count of the users with role ("" for all).
func totalCount(t *testing.T, s *testServer, role string) int {
	t.Helper()
	res := s.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: "/users?limit=1&role=" + role})
	n, err := strconv.Atoi(res.Header.Get("X-Total-Count"))
	if res.Status != http.StatusOK || err != nil {
		t.Fatalf("GET /users?role=%s: %d, X-Total-Count %q", role, res.Status, res.Header.Get("X-Total-Count"))
	}
	return n
}
