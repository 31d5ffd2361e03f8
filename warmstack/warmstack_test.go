package warmstack

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// serve starts h on a loopback listener that speaks HTTP/1.1 and h2c, as usersd's does, and returns
// its URL and a client for each protocol.
func serve(t *testing.T, h http.Handler) (url string, h1, h2 *http.Client, errorLog *syncBuffer) {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	errorLog = &syncBuffer{}
	srv.Config.ErrorLog = log.New(errorLog, "", 0)
	srv.Start()
	t.Cleanup(srv.Close)
	h2Transport := &http.Transport{Protocols: new(http.Protocols)}
	h2Transport.Protocols.SetUnencryptedHTTP2(true)
	t.Cleanup(h2Transport.CloseIdleConnections)
	return srv.URL, &http.Client{Transport: &http.Transport{}}, &http.Client{Transport: h2Transport}, errorLog
}

// syncBuffer is the server's error log: written by its goroutines, read by the test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func get(t *testing.T, c *http.Client, url string) (proto string, body string, err error) {
	t.Helper()
	res, err := c.Get(url)
	if err != nil {
		return "", "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.Proto, string(b), err
}

func TestOneWorkerServesHTTP2RequestsInTurn(t *testing.T) {
	ws := Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Proto", r.Proto)
		io.WriteString(w, "served "+r.URL.Path)
	}), 8).(*handler)
	url, h1, h2, _ := serve(t, ws)
	for i := range 50 {
		proto, body, err := get(t, h2, url+"/a")
		if err != nil || proto != "HTTP/2.0" || body != "served /a" {
			t.Fatalf("request %d over h2c: %s %q %v", i, proto, body, err)
		}
	}
	// Each request after the first finds the worker idle, unless it came while the worker was
	// between its answer and its next wait: then a second one starts, and no more.
	if n := ws.workers.Load(); n < 1 || n > 2 {
		t.Errorf("%d workers served 50 requests one after another, want 1 (or 2)", n)
	}
	before := ws.workers.Load()
	for range 5 {
		if proto, body, err := get(t, h1, url+"/b"); err != nil || proto != "HTTP/1.1" || body != "served /b" {
			t.Fatalf("over HTTP/1.1: %s %q %v", proto, body, err)
		}
	}
	if n := ws.workers.Load(); n != before {
		t.Errorf("HTTP/1.1 requests started workers: %d, then %d", before, n)
	}
}

func TestRequestsPastTheWorkersAreServedWhereTheyCame(t *testing.T) {
	const concurrent, maxWorkers = 6, 2
	arrived, release := make(chan struct{}, concurrent), make(chan struct{})
	ws := Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-release
		io.WriteString(w, "ok")
	}), maxWorkers).(*handler)
	url, _, h2, _ := serve(t, ws)
	var wg sync.WaitGroup
	errs := make(chan error, concurrent)
	for range concurrent {
		wg.Go(func() {
			if _, body, err := get(t, h2, url); err != nil || body != "ok" {
				errs <- errors.Join(err, errors.New("body "+body))
			}
		})
	}
	// Every request reaches the handler at once, though only two workers may run.
	for i := range concurrent {
		select {
		case <-arrived:
		case <-time.After(10 * time.Second):
			t.Fatalf("only %d of %d requests reached the handler", i, concurrent)
		}
	}
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := ws.workers.Load(); n != maxWorkers {
		t.Errorf("%d workers, want the most allowed, %d", n, maxWorkers)
	}
}

func TestAHandlersPanicEndsItsStreamAndTheWorkerGoesOn(t *testing.T) {
	ws := Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/abort":
			panic(http.ErrAbortHandler)
		case "/bug":
			panic("a bug in a handler")
		}
		io.WriteString(w, "ok")
	}), 1).(*handler)
	url, _, h2, errorLog := serve(t, ws)
	for _, path := range []string{"/abort", "/bug"} {
		if _, _, err := get(t, h2, url+path); err == nil {
			t.Errorf("%s: the stream of a panicking handler was answered", path)
		}
		if _, body, err := get(t, h2, url+"/fine"); err != nil || body != "ok" {
			t.Fatalf("after %s: %q %v", path, body, err)
		}
	}
	// net/http logs a panic other than ErrAbortHandler, with its value, as it does without workers;
	// the stream may be reset before the line is written.
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(errorLog.String(), "a bug in a handler") && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if logged := errorLog.String(); !strings.Contains(logged, "a bug in a handler") || strings.Contains(logged, "abort Handler") {
		t.Errorf("the server's error log: %q", logged)
	}
	if n := ws.workers.Load(); n != 1 {
		t.Errorf("%d workers after the panics, want the one, still serving", n)
	}
}

func TestAWorkerSeesTheRequestsContext(t *testing.T) {
	type key struct{}
	seen := make(chan any, 1)
	ws := Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Context().Value(key{})
	}), 1)
	url, _, h2, _ := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), key{}, "the caller's")))
	}))
	if _, _, err := get(t, h2, url); err != nil {
		t.Fatal(err)
	}
	if v := <-seen; v != "the caller's" {
		t.Errorf("the worker saw %v in the request's context", v)
	}
}

func TestIdleWorkersEnd(t *testing.T) {
	ws := Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }), 8).(*handler)
	ws.idle = 100 * time.Millisecond
	url, _, h2, _ := serve(t, ws)
	if _, body, err := get(t, h2, url); err != nil || body != "ok" {
		t.Fatalf("%q %v", body, err)
	}
	if n := ws.workers.Load(); n != 1 {
		t.Fatalf("%d workers after a request, want 1", n)
	}
	for deadline := time.Now().Add(5 * time.Second); ws.workers.Load() != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d workers still there after 5 s without a request", ws.workers.Load())
		}
	}
	if _, body, err := get(t, h2, url); err != nil || body != "ok" {
		t.Fatalf("after the worker ended: %q %v", body, err)
	}
}
