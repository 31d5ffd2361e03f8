package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite" // to run PRAGMA integrity_check on the file between crashes

	"usersd/internal/apitest"
)

// serverFaults returns the faults that were answers (5xx, wrong data) rather than requests cut off
// by the process dying or stopping, which a client sees as a transport error.
func serverFaults(faults []error) []error {
	var answered []error
	for _, err := range faults {
		var se *serverError
		if errors.As(err, &se) {
			answered = append(answered, err)
		}
	}
	return answered
}

// integrityCheck runs SQLite's own check of the file's structure.
func integrityCheck(t *testing.T, dbPath string) {
	t.Helper()
	db, err := sql.Open("sqlite", dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var result string
	if err := db.QueryRow(`PRAGMA integrity_check`).Scan(&result); err != nil || result != "ok" {
		t.Fatalf("PRAGMA integrity_check: %q, %v", result, err)
	}
}

// TestAcknowledgedWritesSurviveSIGKILL kills the real binary with SIGKILL at a random moment of a
// write load, five times in a row. After each crash the file passes PRAGMA integrity_check, and after
// each restart every create and delete that was acknowledged before the crash holds.
func TestAcknowledgedWritesSurviveSIGKILL(t *testing.T) {
	t.Parallel() // checks what was kept, not how fast: see startProcess
	dbPath := filepath.Join(t.TempDir(), "users.db")
	ledger := newLoadLedger()
	for round := range 5 {
		cmd, s, _ := startProcess(t, dbPath)
		verifyLedger(t, s, ledger) // what the previous crashes left must all be there
		if t.Failed() {
			t.FailNow()
		}
		ctx, stopLoad := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		for i := range 8 {
			client := apitest.Transports[i%len(apitest.Transports)].Client
			wg.Go(func() {
				runLoadWorker(ctx, fmt.Sprintf("round %d writer %d", round, i), restLoad{s.BaseURL, client}, ledger)
			})
		}
		time.Sleep(time.Duration(200+rand.IntN(800)) * time.Millisecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		cmd.Wait()
		stopLoad()
		wg.Wait()
		integrityCheck(t, dbPath)
		if faults := serverFaults(ledger.faults); len(faults) > 0 {
			t.Fatalf("round %d: %d server errors before the crash, first: %v", round, len(faults), faults[0])
		}
	}
	_, s, _ := startProcess(t, dbPath)
	verifyLedger(t, s, ledger)
	t.Logf("5 crashes: %d acknowledged users kept, %d acknowledged deletes, %d writes in doubt at a crash",
		len(ledger.names), len(ledger.deleted), len(ledger.inDoubt))
}

// TestSIGTERMLetsStartedRequestsFinish sends SIGTERM while requests are under way: requests whose
// bodies are still arriving when the signal comes all complete and are kept, no answer is a server
// error, and the process exits 0 within its grace period.
func TestSIGTERMLetsStartedRequestsFinish(t *testing.T) {
	dbPath := filepath.Join(t.TempDir(), "users.db")
	cmd, s, _ := startProcess(t, dbPath)
	ctx, stopLoad := context.WithCancel(t.Context())
	defer stopLoad()
	ledger := newLoadLedger()
	var wg sync.WaitGroup
	for i := range 16 {
		client := apitest.Transports[i%len(apitest.Transports)].Client
		wg.Go(func() { runLoadWorker(ctx, fmt.Sprintf("writer %d", i), restLoad{s.BaseURL, client}, ledger) })
	}

	// Slow creates: their headers arrive before the signal and their bodies over a second after it.
	const slow = 10
	type outcome struct {
		status int
		body   string
		err    error
	}
	outcomes := make(chan outcome, slow)
	started := make(chan struct{}, slow)
	for i := range slow {
		go func() {
			body := &trickle{text: fmt.Sprintf(`{"name":"slow %d", "role": "patient"}`, i), every: 40 * time.Millisecond, started: started}
			req, _ := http.NewRequest("POST", s.BaseURL+"/users", body)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("x-api-key", apitest.Key)
			req.ContentLength = int64(len(body.text))
			res, err := apitest.Transports[i%len(apitest.Transports)].Client.Do(req)
			if err != nil {
				outcomes <- outcome{err: err}
				return
			}
			defer res.Body.Close()
			b, err := io.ReadAll(res.Body)
			outcomes <- outcome{status: res.StatusCode, body: string(b), err: err}
		}()
	}
	for range slow {
		<-started
	}
	time.Sleep(100 * time.Millisecond)

	signalled := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var kept []string
	for range slow {
		o := <-outcomes
		if o.err != nil || o.status != http.StatusCreated {
			t.Errorf("a create under way at SIGTERM: %d %s %v, want 201", o.status, o.body, o.err)
			continue
		}
		kept = append(kept, o.body)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v, want status 0", err)
		}
	case <-time.After(10 * time.Second): // the default -shutdown-grace
		t.Fatal("still running 10s after SIGTERM")
	}
	t.Logf("exited %s after SIGTERM", time.Since(signalled).Round(time.Millisecond))
	stopLoad()
	wg.Wait()
	if faults := serverFaults(ledger.faults); len(faults) > 0 {
		t.Fatalf("%d server errors around the shutdown, first: %v", len(faults), faults[0])
	}

	_, again, _ := startProcess(t, dbPath)
	verifyLedger(t, again, ledger)
	for _, body := range kept {
		id := apitest.IDOf(t, apitest.DecodeObject(t, []byte(body)))
		if res := again.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: fmt.Sprintf("/users/%d", id)}); res.Status != http.StatusOK {
			t.Errorf("the slow create %s is gone after the restart: %d", body, res.Status)
		}
	}
}

// trickle is a request body that arrives a byte at a time, every so often; it reports on started
// once its first byte is read, that is once the server is reading the request.
type trickle struct {
	text    string
	sent    int
	every   time.Duration
	started chan<- struct{}
}

func (b *trickle) Read(p []byte) (int, error) {
	if b.sent == len(b.text) {
		return 0, io.EOF
	}
	if b.sent == 1 {
		b.started <- struct{}{}
	}
	if b.sent > 0 {
		time.Sleep(b.every)
	}
	p[0] = b.text[b.sent]
	b.sent++
	return 1, nil
}

// TestAnAcknowledgedKeyedCreateSurvivesSIGKILL: once a keyed create is answered, its answer is on
// disk with the user, so a process killed without warning replays it after a restart.
func TestAnAcknowledgedKeyedCreateSurvivesSIGKILL(t *testing.T) {
	dbPath := filepath.Join(t.TempDir(), "users.db")
	cmd, s, _ := startProcess(t, dbPath)
	create := request{Method: "POST", Path: "/users", Header: apitest.Keyed("before-the-crash"), Body: `{"name":"durable"}`, Key: true}
	first := s.Do(t, apitest.HTTP1Client, create)
	if first.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", first.Status, first.Body)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()

	_, restarted, _ := startProcess(t, dbPath)
	apitest.WantReplay(t, first, restarted.Do(t, apitest.HTTP1Client, create))
	if n := apitest.UserCount(t, restarted.BaseURL); n != "1" {
		t.Fatalf("%s users after the crash and the repeat, want 1", n)
	}
}
