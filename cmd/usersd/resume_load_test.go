package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestManyResumesFromTheStartOfALongLog resumes 50 SSE watches from sequence 0 of a log of 15,000
// changes at once, on SQLite, while one client lists users: every watch must get every change,
// once, in order. A watch reads the log a page at a time, and its pages after the first take turns
// with the other watches', so the lists keep connections of the reader pool; the test reports the
// lists' latency during the resumes against the same lists before them (a figure, not a check:
// see docs/PERFORMANCE.md#resume-from-far-back). Before the turns, 150 such resumes took lists
// from 1-4 ms to 0.1-1.5 s.
func TestManyResumesFromTheStartOfALongLog(t *testing.T) {
	t.Parallel() // checks what the watches got, not how fast: see startProcess
	const changes, watches = 15_000, 50
	dbPath := t.TempDir() + "/users.db"
	_, s, _ := startProcess(t, dbPath)
	insertUsers(t, dbPath, changes)

	lists := func(stop <-chan struct{}) []time.Duration {
		client := &http.Client{Transport: &http.Transport{}, Timeout: 30 * time.Second}
		var took []time.Duration
		for {
			select {
			case <-stop:
				return took
			default:
			}
			start := time.Now()
			res, err := client.Get(s.BaseURL + "/users?limit=20&sort=-createdAt")
			if err != nil {
				t.Errorf("list: %v", err)
				return took
			}
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				t.Errorf("list: %s", res.Status)
			}
			took = append(took, time.Since(start))
			time.Sleep(5 * time.Millisecond)
		}
	}
	stopBaseline := make(chan struct{})
	time.AfterFunc(2*time.Second, func() { close(stopBaseline) })
	baseline := lists(stopBaseline)

	stop := make(chan struct{})
	during := make(chan []time.Duration, 1)
	go func() { during <- lists(stop) }()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, watches)
	for range watches {
		wg.Go(func() { errs <- resumeFromStart(t.Context(), s.BaseURL, changes) })
	}
	wg.Wait()
	resumed := time.Since(start)
	close(stop)
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	p := func(d []time.Duration, q float64) time.Duration {
		slices.Sort(d)
		return d[int(q*float64(len(d)-1))]
	}
	listsDuring := <-during
	t.Logf("%d watches resumed %d changes each in %v; lists before: p50 %v p99 %v (%d); during: p50 %v p99 %v (%d), p99 ratio %.1fx",
		watches, changes, resumed.Round(time.Millisecond), p(baseline, 0.5), p(baseline, 0.99), len(baseline),
		p(listsDuring, 0.5), p(listsDuring, 0.99), len(listsDuring), float64(p(listsDuring, 0.99))/float64(p(baseline, 0.99)))
}

// resumeFromStart reads GET /users/events?afterSequence=0 until it has had changes 1 to n, checking
// that each comes once and in order.
func resumeFromStart(ctx context.Context, base string, n int64) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", base+"/users/events?afterSequence=0", nil)
	if err != nil {
		return err
	}
	res, err := (&http.Client{Transport: &http.Transport{}}).Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("resume: %s", res.Status)
	}
	scanner := bufio.NewScanner(res.Body)
	var last int64
	for scanner.Scan() {
		if value, ok := strings.CutPrefix(scanner.Text(), "id: "); ok {
			id, err := strconv.ParseInt(value, 10, 64)
			if err != nil {
				return fmt.Errorf("id %q: %v", value, err)
			}
			if id == last {
				continue // a heartbeat repeats the position
			}
			if id != last+1 {
				return fmt.Errorf("after change %d came %d", last, id)
			}
			if last = id; last == n {
				return nil
			}
		}
	}
	return fmt.Errorf("the stream ended after change %d of %d: %v", last, n, scanner.Err())
}
