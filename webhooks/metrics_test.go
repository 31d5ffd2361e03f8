package webhooks_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"usersd/webhooks"
)

// TestTheMetricsCountAttemptsByResultAndShowEachSubscriptionsLag: each attempt is counted under its
// result (delivered, failed, gone), and a subscription's lag is the age of the oldest change not
// yet sent while its receiver fails, 0 once it has been sent everything, and gone with the
// subscription when a 410 disables it.
func TestTheMetricsCountAttemptsByResultAndShowEachSubscriptionsLag(t *testing.T) {
	registry := prometheus.NewRegistry()
	m, err := webhooks.NewMetrics(registry)
	if err != nil {
		t.Fatal(err)
	}
	st, svc := setupWithMetrics(t, loopback, m)
	failing := newReceiver(t, func(n int) int {
		if n == 0 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	gone := newReceiver(t, always(http.StatusGone))
	ok := subscribe(t, svc, failing.URL)
	ended := subscribe(t, svc, gone.URL)
	createUsers(t, st, 2, "")

	failing.waitFor(t, 1)
	lagOf := func(id int32) string {
		return `usersd_webhook_lag_seconds{webhook="` + strconv.Itoa(int(id)) + `"}`
	}
	waitForMetrics(t, registry, "the failing subscription's lag", func(text string) bool {
		return strings.Contains(text, lagOf(ok.GetId())) && !strings.Contains(text, lagOf(ok.GetId())+" 0\n")
	})
	failing.waitFor(t, 3) // the retry, and the second change
	gone.waitFor(t, 1)
	waitForMetrics(t, registry, "every result counted, the lag back to 0 and the disabled subscription's lag gone", func(text string) bool {
		return strings.Contains(text, `usersd_webhook_attempts_seconds_count{result="delivered"} 2`) &&
			strings.Contains(text, `usersd_webhook_attempts_seconds_count{result="failed"} 1`) &&
			strings.Contains(text, `usersd_webhook_attempts_seconds_count{result="gone"} 1`) &&
			strings.Contains(text, lagOf(ok.GetId())+" 0\n") && !strings.Contains(text, lagOf(ended.GetId()))
	})
}

// waitForMetrics waits up to 15 s for the registry's text exposition, as /metrics serves it, to
// satisfy ok.
func waitForMetrics(t *testing.T, registry *prometheus.Registry, what string, ok func(text string) bool) {
	t.Helper()
	serve := promhttp.HandlerFor(registry, promhttp.HandlerOpts{})
	deadline := time.Now().Add(15 * time.Second)
	for {
		res := httptest.NewRecorder()
		serve.ServeHTTP(res, httptest.NewRequest("GET", "/metrics", nil))
		if text := res.Body.String(); ok(text) {
			return
		} else if time.Now().After(deadline) {
			t.Fatalf("waited 15 s for %s; the metrics:\n%s", what, text)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
