package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"usersd/internal/apitest"
	"usersd/internal/proctest"
)

// TestWatchersThatNeverReadAreCutOverHTTP1 opens 300 Server-Sent Events watches over HTTP/1.1 that
// never read a byte, then creates 2,000 users. A connection's kernel send buffer used to grow to
// megabytes, so the server's writes never blocked, the watch's write deadline never started, and
// every change queued in kernel memory for as long as the client stayed connected. Every one of
// these watchers must be cut within 60 s of the last create.
func TestWatchersThatNeverReadAreCutOverHTTP1(t *testing.T) {
	t.Parallel() // mostly waits for write deadlines: see startProcess
	const watchers, creates = 300, 2000
	needOpenFiles(t, watchers+200)
	adminAddr := proctest.FreeLoopbackAddr(t)
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
	// Every watch is open before the creates that stall them: on a busy machine the creates can
	// take longer than the write deadline, and the first watches are cut before the last create.
	for deadline := time.Now().Add(30 * time.Second); admin.Metric(t, "usersd_watchers", nil) < watchers; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%v watches open 30 s after they were asked for, want %d", admin.Metric(t, "usersd_watchers", nil), watchers)
		}
	}

	var wg sync.WaitGroup
	failures := make(chan error, 8)
	for w := range 8 {
		wg.Go(func() {
			for n := w; n < creates; n += 8 {
				if status, _, err := apitest.PostJSON(s.BaseURL+"/users", fmt.Sprintf(`{"name":"user %d with a name long enough to fill buffers"}`, n)); err != nil || status != 201 {
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
	for {
		n := admin.Metric(t, "usersd_watchers", nil)
		if n == 0 {
			break
		}
		if time.Since(created) > 60*time.Second {
			t.Fatalf("%v of %d watchers that never read are still served 60 s after the last create", n, watchers)
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("all %d non-reading watchers were cut %v after the last create", watchers, time.Since(created).Round(time.Second))

	// And the server holds nothing for them: each connection's socket on the server's side is gone,
	// or has had every byte it sent acknowledged. (The clients' view is no test of it: a client
	// whose buffer overflowed drops the server's reset as outside its window, and learns of the
	// end only from its own keepalive.) A cut watch's handler may still wait out its write
	// deadline on a last write before its connection closes.
	clientPorts := make(map[uint16]bool, len(conns))
	for _, c := range conns {
		clientPorts[uint16(c.LocalAddr().(*net.TCPAddr).Port)] = true
	}
	serverPort := uint16(mustTCPAddr(t, addr).Port)
	for deadline := created.Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		holding := serverSocketsHoldingBytes(t, serverPort, clientPorts)
		if len(holding) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("60 s after the last create, the server still holds unsent bytes for %d of %d watchers, e.g. %s", len(holding), watchers, holding[0])
		}
	}
	t.Logf("and the server held nothing for them %v after it", time.Since(created).Round(time.Second))
}

// serverSocketsHoldingBytes lists the server's sockets, on port serverPort, of connections from
// clientPorts that still hold bytes the client has not acknowledged (the kernel's tx_queue, read
// from /proc/net/tcp and tcp6), each as its line there.
func serverSocketsHoldingBytes(t *testing.T, serverPort uint16, clientPorts map[uint16]bool) []string {
	t.Helper()
	var holding []string
	for _, file := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		table, err := os.ReadFile(file)
		if err != nil {
			proctest.MissingTool(t, "USERS_REQUIRE_PROCFS", fmt.Sprintf("no %s to read the server's sockets from (%v): the test needs Linux", file, err))
		}
		for _, line := range strings.Split(string(table), "\n")[1:] {
			// sl local_address rem_address st tx_queue:rx_queue ...; addresses are hex IP:port.
			fields := strings.Fields(line)
			if len(fields) < 5 {
				continue
			}
			local, remote := hexPort(fields[1]), hexPort(fields[2])
			txQueue, _, _ := strings.Cut(fields[4], ":")
			if local == serverPort && clientPorts[remote] && strings.Trim(txQueue, "0") != "" {
				holding = append(holding, strings.Join(fields[:5], " "))
			}
		}
	}
	return holding
}

// hexPort returns the port of an address as /proc/net/tcp writes it (hex IP, colon, hex port).
func hexPort(address string) uint16 {
	_, port, _ := strings.Cut(address, ":")
	n, _ := strconv.ParseUint(port, 16, 16)
	return uint16(n)
}

// mustTCPAddr parses a host:port the test listens on.
func mustTCPAddr(t *testing.T, hostPort string) *net.TCPAddr {
	t.Helper()
	a, err := net.ResolveTCPAddr("tcp", hostPort)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
