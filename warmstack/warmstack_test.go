package warmstack

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"runtime"
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

// onAWorker reports whether the calling goroutine is a warmstack worker.
func onAWorker() bool {
	buf := make([]byte, 64<<10)
	return strings.Contains(string(buf[:runtime.Stack(buf, false)]), "warmstack.(*handler).work")
}

// whereServed answers with where the request was served: "worker" or "inline".
var whereServed = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	if onAWorker() {
		io.WriteString(w, "worker")
	} else {
		io.WriteString(w, "inline")
	}
})

func TestHTTP2RequestsGoToAWorkerAndHTTP1RequestsDoNot(t *testing.T) {
	ws := Handler(whereServed, 8, nil).(*handler)
	url, h1, h2, _ := serve(t, ws)
	for i := range 50 {
		proto, body, err := get(t, h2, url)
		if err != nil || proto != "HTTP/2.0" || body != "worker" {
			t.Fatalf("request %d over h2c: %s %q %v", i, proto, body, err)
		}
	}
	// Each request after the first finds the worker idle, unless it came while the worker was
	// between its answer and its next wait: then a second one starts, and no more.
	if n := ws.workers.Load(); n < 1 || n > 2 {
		t.Errorf("%d workers served 50 requests one after another, want 1 (or 2)", n)
	}
	for range 5 {
		if proto, body, err := get(t, h1, url); err != nil || proto != "HTTP/1.1" || body != "inline" {
			t.Fatalf("over HTTP/1.1: %s %q %v", proto, body, err)
		}
	}
}

func TestLastingRequestsAreServedWhereTheyCame(t *testing.T) {
	ws := Handler(whereServed, 8, func(r *http.Request) bool { return r.URL.Path == "/watch" })
	url, _, h2, _ := serve(t, ws)
	for path, want := range map[string]string{"/watch": "inline", "/get": "worker"} {
		if _, body, err := get(t, h2, url+path); err != nil || body != want {
			t.Errorf("%s: served %q (%v), want %s", path, body, err, want)
		}
	}
}

func TestRequestsPastTheWorkersAreServedWhereTheyCame(t *testing.T) {
	const concurrent, maxWorkers = 6, 2
	arrived, release := make(chan bool, concurrent), make(chan struct{})
	var releaseOnce sync.Once
	ws := Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- onAWorker()
		<-release
		io.WriteString(w, "ok")
	}), maxWorkers, nil).(*handler)
	url, _, h2, _ := serve(t, ws)
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) }) // before the server closes
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
	onWorkers := 0
	for i := range concurrent {
		select {
		case worker := <-arrived:
			if worker {
				onWorkers++
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("only %d of %d requests reached the handler", i, concurrent)
		}
	}
	releaseOnce.Do(func() { close(release) })
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if onWorkers != maxWorkers {
		t.Errorf("%d of %d requests held at once ran on workers, want the most allowed, %d", onWorkers, concurrent, maxWorkers)
	}
}

func TestAHandlersPanicEndsItsStreamAndTheWorkerGoesOn(t *testing.T) {
	ws := Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/abort":
			panic(http.ErrAbortHandler)
		case "/bug":
			panic("a bug in a handler")
		case "/goexit":
			runtime.Goexit()
		}
		whereServed(w, r)
	}), 1, nil).(*handler)
	url, _, h2, errorLog := serve(t, ws)
	for _, path := range []string{"/abort", "/bug", "/goexit"} {
		done := make(chan error, 1)
		go func() { _, _, err := get(t, h2, url+path); done <- err }()
		select {
		case err := <-done:
			if path != "/goexit" && err == nil {
				t.Errorf("%s: the stream of a panicking handler was answered", path)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the request never ended", path)
		}
		// The one worker goes on: a request that comes while it is between its answer and its
		// next wait is served where it came, so a few may be, before one finds it.
		body := ""
		for try := 0; try < 50 && body != "worker"; try++ {
			var err error
			if _, body, err = get(t, h2, url+"/fine"); err != nil {
				t.Fatalf("after %s: %v", path, err)
			}
			time.Sleep(time.Millisecond)
		}
		if body != "worker" {
			t.Fatalf("after %s, 50 requests were served %q, none on the worker", path, body)
		}
	}
	// net/http logs a panic other than ErrAbortHandler, with its value and where the handler
	// was, as it does without workers; the stream may be reset before the line is written.
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(errorLog.String(), "a bug in a handler") && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if logged := errorLog.String(); !strings.Contains(logged, "a bug in a handler") || !strings.Contains(logged, "warmstack_test.go") ||
		strings.Contains(logged, "abort Handler") {
		t.Errorf("the server's error log: %q", logged)
	}
}

func TestAWorkerSeesTheRequestsContext(t *testing.T) {
	type key struct{}
	seen := make(chan any, 1)
	ws := Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !onAWorker() {
			t.Error("the request was not served on a worker")
		}
		seen <- r.Context().Value(key{})
	}), 1, nil)
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
	ws := Handler(whereServed, 8, nil).(*handler)
	ws.idle = 100 * time.Millisecond
	url, _, h2, _ := serve(t, ws)
	if _, body, err := get(t, h2, url); err != nil || body != "worker" {
		t.Fatalf("%q %v", body, err)
	}
	for deadline := time.Now().Add(5 * time.Second); ws.workers.Load() != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d workers still there after 5 s without a request", ws.workers.Load())
		}
	}
	if _, body, err := get(t, h2, url); err != nil || body != "worker" {
		t.Fatalf("after the worker ended: %q %v", body, err)
	}
}
