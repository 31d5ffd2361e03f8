package replicas_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"usersd/internal/apitest"
	"usersd/store/storetest"

	"github.com/jackc/pgx/v5"
)

// TestFailoverUnderPatroni runs usersd the way docs/POSTGRESQL.md deploys it: three Patroni nodes in
// synchronous mode with etcd, HAProxy in front of the leader, PgBouncer in front of HAProxy, each
// configured by the document's own blocks, and usersd's role and database made by its SQL. Under
// eight writers of keyed creates and a watch on every protocol it goes through a planned switchover,
// a crash of the leader's postmaster, and the loss of the leader's node, and checks after each: how
// long writes stopped (logged: docs/POSTGRESQL.md's failure table gives these figures), that every
// key a failed create held was given back within a second of writes working again, that every
// failed create was answered as the table promises, and that /readyz answered promptly and never
// said ready while writes could not commit. At the end no acknowledged create is lost and every
// watch saw each once.
func TestFailoverUnderPatroni(t *testing.T) {
	doc := readDoc(t, "../../../docs/POSTGRESQL.md")
	c := storetest.StartPatroni(t, storetest.PatroniConfig{
		Node:    docBlock(t, doc, "yaml", "scope: usersd"),
		HAProxy: docBlock(t, doc, "", "listen primary"),
	})

	// No way in without a password: not over TCP, not on the server's own socket (initdb's
	// pg_hba.conf, which the document's first Patroni configuration added its lines to, trusts
	// both).
	leader := c.Node(t, "leader")
	for _, dsn := range []string{
		fmt.Sprintf("postgres://postgres@%s/postgres?sslmode=disable", leader.Hostport()),
		fmt.Sprintf("postgres://postgres@/postgres?host=%s&port=%d", c.SocketDir, leader.Port),
	} {
		if err := connectOnce(dsn); err == nil || !strings.Contains(err.Error(), "password") {
			t.Errorf("%s without a password: %v, want a refusal for want of a password", dsn, err)
		}
	}

	// usersd's role and database, as the document makes them.
	admin := storetest.OpenPostgres(t, c.SuperuserURL(c.HAProxy, "postgres"))
	for _, statement := range strings.Split(docBlock(t, doc, "sql", "CREATE ROLE usersd"), ";\n") {
		if statement = strings.TrimSpace(statement); statement != "" {
			if _, err := admin.Exec(strings.ReplaceAll(statement, "CHANGE-ME", c.Password)); err != nil {
				t.Fatalf("%s: %v", statement, err)
			}
		}
	}
	admin.Close()
	direct := fmt.Sprintf("postgres://usersd:%s@%s/users?sslmode=disable", c.Password, c.HAProxy)
	pooler := storetest.StartPgBouncerWith(t, direct, iniLines(docBlock(t, doc, "ini", "server_login_retry"))...)
	cmd, s, lines := startProcess(t, pooler.Pooled(t, direct), "-db-direct", direct)

	// Watches on SSE, with clients of their own that have no time limit (apitest's shared clients
	// end a request at 30 s): TestFailoverLosesNoAcknowledgedWrite holds every protocol's watch
	// across a failover, this one holds the feed across three.
	h1, h2 := &http.Client{}, apitest.NewH2CClient()
	h2.Timeout = 0
	var watchers []*failoverWatch
	for _, p := range []apitest.WatchProtocol{{Name: "SSE over HTTP/1.1", SSE: h1}, {Name: "SSE over h2c", SSE: h2}} {
		w := &failoverWatch{name: p.Name, stream: apitest.StartWatch(t, s.Server, p, -1, ""), done: make(chan struct{})}
		go w.read()
		watchers = append(watchers, w)
	}
	readiness := startReadinessProbes(s.BaseURL)
	load := &keyedLoad{baseURL: s.BaseURL, acked: map[string]int32{}}
	var writers sync.WaitGroup
	for w := range 8 {
		writers.Go(func() { load.write(w) })
	}

	faults := []struct {
		name  string
		cause func()
	}{
		{"switchover", func() { c.Switchover(t, c.Node(t, "sync_standby")) }},
		{"postmaster crash", func() { c.Node(t, "leader").KillPostmaster(t) }},
		{"node lost", func() { c.Node(t, "leader").Kill(t) }},
	}
	for i, fault := range faults {
		if i > 0 {
			c.WaitHealthy(t, 2*time.Minute)
		}
		time.Sleep(3 * time.Second) // writes flowing before the fault
		began := time.Now()
		fault.cause()
		// The outage is over once creates have been acknowledged steadily for 5 s.
		deadline := time.Now().Add(90 * time.Second)
		for !load.steadySince(began, 5*time.Second) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: writes did not come back within 90 s; answers since: %v", fault.name, load.statusesSince(began))
			}
			time.Sleep(100 * time.Millisecond)
		}
		checkOutage(t, fault.name, began, load, readiness)
	}
	load.stop.Store(true)
	writers.Wait()
	readiness.stop()
	load.failOnHeldKeys(t, cmd, lines, "when the load stopped")
	stored := load.checkStored(t, s)
	time.Sleep(time.Second)
	checkWatches(t, watchers, load.acked, stored)
}

// checkOutage checks one fault's outage, which began at began: writes stopped between two
// acknowledged creates, the longest gap after began, and a switchover's is shorter than a
// request's deadline; within it, and until a second after it, every
// failed create was answered 503 or refused as in progress (409) while its key was still held, and
// /readyz answered within 2 s, turned 503 within 5 s of writes stopping, and said ready only once
// they worked.
func checkOutage(t *testing.T, fault string, began time.Time, load *keyedLoad, readiness *readinessProbes) {
	t.Helper()
	load.mu.Lock()
	answers := append([]loadAnswer(nil), load.answers...)
	load.mu.Unlock()
	var lastAck, stopped, back time.Time
	for _, a := range answers {
		if a.status != http.StatusCreated || a.ended.Before(began.Add(-time.Second)) {
			continue
		}
		if !lastAck.IsZero() && a.ended.Sub(lastAck) > back.Sub(stopped) {
			stopped, back = lastAck, a.ended
		}
		lastAck = a.ended
	}
	statuses := map[int]int{}
	var lateConflicts []string
	for _, a := range answers {
		if a.ended.Before(stopped) || a.status == http.StatusCreated {
			continue
		}
		statuses[a.status]++
		if a.status == http.StatusConflict && a.ended.After(back.Add(time.Second)) {
			lateConflicts = append(lateConflicts, fmt.Sprintf("%s after writes came back", a.ended.Sub(back).Round(time.Millisecond)))
		}
	}
	t.Logf("%s: writes stopped %v after the fault began, for %v; failed creates by status: %v",
		fault, stopped.Sub(began).Round(time.Millisecond), back.Sub(stopped).Round(time.Millisecond), statuses)
	// A planned switchover must not outlast a request's deadline (10 s): with PgBouncer's default
	// server_login_retry (15 s) it did, and creates waited past it.
	if fault == "switchover" && back.Sub(stopped) >= 10*time.Second {
		t.Errorf("switchover: writes stopped for %v, longer than a request's deadline of 10 s", back.Sub(stopped).Round(time.Millisecond))
	}
	if len(lateConflicts) > 0 {
		t.Errorf("%s: a failed create's key was still held (409) %v", fault, lateConflicts)
	}
	for status := range statuses {
		if status != http.StatusServiceUnavailable && status != http.StatusConflict {
			t.Errorf("%s: %d creates answered %d; the failure table promises 503 (retryable), or 409 while a key is given back", fault, statuses[status], status)
		}
	}

	var saidUnready bool
	for _, p := range readiness.since(stopped) {
		if p.took > 2*time.Second {
			t.Errorf("%s: /readyz took %v to answer", fault, p.took.Round(time.Millisecond))
		}
		if p.began.After(back) {
			break
		}
		if p.status != http.StatusOK {
			saidUnready = true
		} else if p.began.After(stopped.Add(5*time.Second)) && p.began.Before(back.Add(-time.Second)) {
			t.Errorf("%s: /readyz said ready %v after writes stopped, %v before they came back", fault,
				p.began.Sub(stopped).Round(time.Millisecond), back.Sub(p.began).Round(time.Millisecond))
		}
	}
	if back.Sub(stopped) > 6*time.Second && !saidUnready {
		t.Errorf("%s: writes stopped for %v and /readyz never said 503", fault, back.Sub(stopped).Round(time.Millisecond))
	}
}

// connectOnce connects to dsn once, and says why it could not.
func connectOnce(dsn string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	return conn.Close(ctx)
}

// steadySince tells whether creates have been acknowledged for the last d without a pause of more
// than a second, and the first of them began after began.
func (l *keyedLoad) steadySince(began time.Time, d time.Duration) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	last := now
	for i := len(l.answers) - 1; i >= 0; i-- {
		a := l.answers[i]
		if a.status != http.StatusCreated {
			continue
		}
		if last.Sub(a.ended) > time.Second || a.began.Before(began) {
			return false
		}
		if now.Sub(a.ended) >= d {
			return true
		}
		last = a.ended
	}
	return false
}

func (l *keyedLoad) statusesSince(began time.Time) map[int]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	statuses := map[int]int{}
	for _, a := range l.answers {
		if a.ended.After(began) {
			statuses[a.status]++
		}
	}
	return statuses
}

// readinessProbes asks GET /readyz every 100 ms, as a load balancer would, and keeps the answers.
type readinessProbes struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	probes []readinessProbe
}

type readinessProbe struct {
	began  time.Time
	took   time.Duration
	status int // 0 when no answer came within 5 s
}

func startReadinessProbes(baseURL string) *readinessProbes {
	ctx, cancel := context.WithCancel(context.Background())
	r := &readinessProbes{cancel: cancel, done: make(chan struct{})}
	client := &http.Client{Timeout: 5 * time.Second}
	go func() {
		defer close(r.done)
		for ctx.Err() == nil {
			p := readinessProbe{began: time.Now()}
			if res, err := client.Get(baseURL + "/readyz"); err == nil {
				res.Body.Close()
				p.status = res.StatusCode
			}
			p.took = time.Since(p.began)
			r.mu.Lock()
			r.probes = append(r.probes, p)
			r.mu.Unlock()
			time.Sleep(100 * time.Millisecond)
		}
	}()
	return r
}

func (r *readinessProbes) stop() { r.cancel(); <-r.done }

func (r *readinessProbes) since(t time.Time) []readinessProbe {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []readinessProbe
	for _, p := range r.probes {
		if p.began.After(t) {
			out = append(out, p)
		}
	}
	return out
}

func readDoc(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// docBlock returns the one fenced block of doc in language lang ("" for none) that holds marker.
// Only a fence's first word is its language: "sh norun" is sh.
func docBlock(t *testing.T, doc, lang, marker string) string {
	t.Helper()
	var found []string
	var block strings.Builder
	inBlock, blockLang := false, ""
	for _, line := range strings.Split(doc, "\n") {
		fence, isFence := strings.CutPrefix(strings.TrimSpace(line), "```")
		switch {
		case isFence && !inBlock:
			inBlock, blockLang = true, strings.SplitN(fence, " ", 2)[0]
			block.Reset()
		case isFence:
			inBlock = false
			if blockLang == lang && strings.Contains(block.String(), marker) {
				found = append(found, block.String())
			}
		case inBlock:
			block.WriteString(line + "\n")
		}
	}
	if len(found) != 1 {
		t.Fatalf("want one ```%s block holding %q in the document, found %d", lang, marker, len(found))
	}
	return found[0]
}

// iniLines are the settings of an ini block, one per line, indented or not, without comments.
func iniLines(block string) []string {
	var lines []string
	for _, l := range strings.Split(block, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, ";") && !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	return lines
}
