package main

import (
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"usersd/internal/apitest"
)

// TestWatchersThatNeverReadAreCutOverHTTP1 opens 300 Server-Sent Events watches over HTTP/1.1 that
// never read a byte, then creates 2,000 users. A connection's kernel send buffer used to grow to
// megabytes, so the server's writes never blocked, the watch's write deadline never started, and
// every change queued in kernel memory for as long as the client stayed connected. Every one of
// these watchers must be cut within 60 s of the last create.
func TestWatchersThatNeverReadAreCutOverHTTP1(t *testing.T) {
	const watchers, creates = 300, 2000
	needOpenFiles(t, watchers+200)
	adminAddr := freeLoopbackAddr(t)
	_, s, _ := startProcess(t, filepath.Join(t.TempDir(), "users.db"), "-watch-heartbeat", "2s", "-admin-addr", adminAddr)
	admin := &testServer{Server: apitest.Server{BaseURL: "http://" + adminAddr}}
	addr := strings.TrimPrefix(s.BaseURL, "http://")

	conns := make([]net.Conn, watchers)
	for i := range conns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		// The smallest receive window the kernel allows: the client takes in next to nothing.
		c.(*net.TCPConn).SetReadBuffer(4 << 10)
		if _, err := fmt.Fprintf(c, "GET /users/events HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\n\r\n", addr); err != nil {
			t.Fatal(err)
		}
		conns[i] = c
	}

	var wg sync.WaitGroup
	failures := make(chan error, 8)
	for w := range 8 {
		wg.Go(func() {
			for n := w; n < creates; n += 8 {
				if status, err := postJSON(s.BaseURL+"/users", fmt.Sprintf(`{"name":"user %d with a name long enough to fill buffers"}`, n)); err != nil || status != 201 {
					failures <- fmt.Errorf("create %d: %d %v", n, status, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(failures)
	for err := range failures {
		t.Fatal(err)
	}
	created := time.Now()

	// The server counts its open watches; reading the connections would make them readers.
	if n := metricValue(t, admin, "usersd_watchers", nil); n < watchers {
		t.Fatalf("%v watches open after the creates, want the %d that never read", n, watchers)
	}
	for {
		n := metricValue(t, admin, "usersd_watchers", nil)
		if n == 0 {
			break
		}
		if time.Since(created) > 60*time.Second {
			t.Fatalf("%v of %d watchers that never read are still served 60 s after the last create", n, watchers)
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("all %d non-reading watchers were cut %v after the last create", watchers, time.Since(created).Round(time.Second))
	defer func() {
		t.Logf("and their connections closed %v after it", time.Since(created).Round(time.Second))
	}()
	// And their connections are closed, seen from the client without reading (which would make it
	// a reader): the server's end is gone, so the client's socket waits for it to close.
	// A cut watch's handler may still wait out its write deadline on a last write before it ends.
	for deadline := created.Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		stillOpen := 0
		for _, c := range conns {
			if tcpState(t, c) == tcpEstablished {
				stillOpen++
			}
		}
		if stillOpen == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d connections are still established 60 s after the last create", stillOpen, watchers)
		}
	}
}

const tcpEstablished = 1 // the kernel's TCP_ESTABLISHED

// tcpState returns the kernel's state of a TCP connection (TCP_INFO), without reading from it.
func tcpState(t *testing.T, c net.Conn) uint8 {
	t.Helper()
	raw, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var info *unix.TCPInfo
	var infoErr error
	if err := raw.Control(func(fd uintptr) { info, infoErr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO) }); err != nil {
		t.Fatal(err)
	}
	if infoErr != nil {
		t.Fatal(infoErr)
	}
	return info.State
}
