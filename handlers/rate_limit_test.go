package handlers

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"

	usersv1 "usersd/gen/users/v1"
	"usersd/internal/apitest"
	"usersd/store/observed"
	"usersd/store/sqlstore"
)

// startRateLimitedService serves the users with a limit of perSecond requests a second per caller,
// in bursts of burst, on a store whose calls are counted.
func startRateLimitedService(t *testing.T, perSecond float64, burst int) (*testServer, func() float64) {
	t.Helper()
	st, err := sqlstore.Open(context.Background(), filepath.Join(t.TempDir(), "users.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	registry := prometheus.NewRegistry()
	counted, err := observed.New(st, observed.Options{Metrics: registry, System: "sqlite"})
	if err != nil {
		t.Fatal(err)
	}
	s := startServerWith(t, Config{Store: counted, Keys: scopesTestKeySet(t), RateLimit: perSecond, RateBurst: burst, Logger: slog.New(slog.DiscardHandler)})
	storeCalls := func() float64 {
		families, err := registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var n float64
		for _, f := range families {
			if f.GetName() == "usersd_store_operation_duration_seconds" {
				for _, m := range f.GetMetric() {
					n += float64(m.GetHistogram().GetSampleCount())
				}
			}
		}
		return n
	}
	return s, storeCalls
}

// TestACallerOverItsRateIsRefusedWithTheDraftHeaders: with a limit of 0.5 a second (a token every
// 2 s, so that a slow machine does not refill the bucket between requests) in bursts of 3, a
// caller's first 3 requests pass and the 4th is 429 with Retry-After and the IETF draft's
// RateLimit-Policy and RateLimit; the refused request does no store work; another caller, and the
// anonymous caller of the same address, each have a bucket of their own; RPC answers
// resource_exhausted; and the bucket fills again with time.
func TestACallerOverItsRateIsRefusedWithTheDraftHeaders(t *testing.T) {
	s, storeCalls := startRateLimitedService(t, 0.5, 3)
	get := func(key string) apitest.Response {
		header := map[string]string{}
		if key != "" {
			header[APIKeyHeader] = key
		}
		return s.Do(t, apitest.HTTP1Client, apitest.Request{Method: "GET", Path: "/users", Header: header})
	}
	for i := range 3 {
		res := get(scopesReaderKey)
		if res.Status != http.StatusOK {
			t.Fatalf("request %d of the burst: %d %s", i+1, res.Status, res.Body)
		}
		// r tokens left, and (3 - r) / 0.5 seconds until the bucket is full.
		if got, want := res.Header.Get("RateLimit"), fmt.Sprintf(`"caller";r=%d;t=%d`, 2-i, 2*(i+1)); got != want {
			t.Errorf("request %d: RateLimit %q, want %q", i+1, got, want)
		}
	}
	before := storeCalls()
	refused := get(scopesReaderKey)
	if refused.Status != http.StatusTooManyRequests {
		t.Fatalf("the 4th request: %d %s, want 429", refused.Status, refused.Body)
	}
	refused.ErrorMessage(t)
	if got := refused.Header.Get("RateLimit-Policy"); got != `"caller";q=3;w=6` {
		t.Errorf("RateLimit-Policy %q, want \"caller\";q=3;w=6", got)
	}
	if got := refused.Header.Get("RateLimit"); got != `"caller";r=0;t=2` {
		t.Errorf("RateLimit %q, want \"caller\";r=0;t=2", got)
	}
	if retry, err := strconv.Atoi(refused.Header.Get("Retry-After")); err != nil || retry != 2 {
		t.Errorf("Retry-After %q, want 2", refused.Header.Get("Retry-After"))
	}
	if after := storeCalls(); after != before {
		t.Errorf("the refused request made %v store calls, want none", after-before)
	}

	// Other callers have buckets of their own: another key's, and the address's (no key).
	if res := get(scopesFullKey); res.Status != http.StatusOK {
		t.Errorf("another key: %d %s", res.Status, res.Body)
	}
	if res := get(""); res.Status != http.StatusOK {
		t.Errorf("no key: %d %s", res.Status, res.Body)
	}
	// RPC: the same bucket, refused as resource_exhausted.
	client := s.RPCClient(apitest.RPCProtocolNamed(t, "gRPC"), scopesReaderKey)
	if _, err := client.ListUsers(context.Background(), &usersv1.ListUsersRequest{}); connect.CodeOf(err) != connect.CodeResourceExhausted {
		t.Errorf("ListUsers over gRPC with the spent key: %v, want resource_exhausted", err)
	}
	time.Sleep(2100 * time.Millisecond) // a token back
	if res := get(scopesReaderKey); res.Status != http.StatusOK {
		t.Errorf("2 s later: %d %s", res.Status, res.Body)
	}
}

// TestGuessingKeysIsLimitedByAddress: requests with wrong keys spend their address's bucket of
// failures, so that guessing keys goes no faster than the limit; and once it is spent, a right key
// from that address is refused the same way, so that the answer does not tell which guess was
// right.
func TestGuessingKeysIsLimitedByAddress(t *testing.T) {
	s, _ := startRateLimitedService(t, 0.1, 2)
	statuses := map[int]int{}
	for i := range 5 {
		res := s.Do(t, apitest.HTTP1Client, apitest.Request{Method: "POST", Path: "/users", Body: `{"name":"x"}`,
			Header: map[string]string{APIKeyHeader: fmt.Sprintf("guess-%02d-0123456789abcdef", i), "Content-Type": "application/json"}})
		statuses[res.Status]++
	}
	if statuses[http.StatusUnauthorized] != 2 || statuses[http.StatusTooManyRequests] != 3 {
		t.Fatalf("5 guesses answered %v, want 2 401s then 3 429s", statuses)
	}
	right := s.Do(t, apitest.HTTP1Client, apitest.Request{Method: "POST", Path: "/users", Body: `{"name":"x"}`,
		Header: map[string]string{APIKeyHeader: scopesFullKey, "Content-Type": "application/json"}})
	if right.Status != http.StatusTooManyRequests {
		t.Fatalf("the right key after the guesses: %d %s, want 429 like a wrong one", right.Status, right.Body)
	}
}
