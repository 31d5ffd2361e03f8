package handlers

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	usersv1 "usersd/gen/users/v1"
	"usersd/internal/apitest"
)

// TestStreamRoutesOutliveTheRequestDeadline: a route that streams (WatchUsers, which the proto
// declares server streaming, and GET /users/events, added with watch) has no request deadline,
// while its heartbeats keep coming; every other route has one.
func TestStreamRoutesOutliveTheRequestDeadline(t *testing.T) {
	const timeout, heartbeat, watchFor = 50 * time.Millisecond, 20 * time.Millisecond, 400 * time.Millisecond
	s := startServerWith(t, Config{RequestTimeout: timeout, WatchHeartbeat: heartbeat})

	for _, p := range apitest.RPCProtocols {
		t.Run(p.Name, func(t *testing.T) {
			// Cancelled, not timed out: a client's own timeout travels as the call's deadline.
			ctx, cancel := context.WithCancel(t.Context())
			defer time.AfterFunc(watchFor, cancel).Stop()
			stream, err := s.RPCClient(p, "").WatchUsers(ctx, &usersv1.WatchUsersRequest{})
			if err != nil {
				t.Fatal(err)
			}
			beats := 0
			for stream.Receive() {
				beats++
			}
			if ctx.Err() == nil || beats < int(watchFor/heartbeat)/2 {
				t.Fatalf("the watch ended after %d heartbeats (%v) before the client left; want it open for %v past a %v deadline",
					beats, stream.Err(), watchFor, timeout)
			}
		})
	}
	t.Run("Server-Sent Events", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer time.AfterFunc(watchFor, cancel).Stop()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.BaseURL+"/users/events", nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		beats := 0
		lines := bufio.NewScanner(res.Body)
		for lines.Scan() {
			if strings.HasPrefix(lines.Text(), "event: heartbeat") {
				beats++
			}
		}
		if ctx.Err() == nil || beats < int(watchFor/heartbeat)/2 {
			t.Fatalf("the stream ended after %d heartbeats (%v) before the client left", beats, lines.Err())
		}
	})

	var stream, bounded int
	for _, r := range s.service.routes {
		if r.stream {
			stream++
		} else {
			bounded++
		}
	}
	if stream != 3 || bounded < 20 {
		t.Fatalf("%d stream routes and %d with a deadline; want WatchUsers, /users/events and gRPC health's Watch alone to stream", stream, bounded)
	}
}
