package handlers

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"usersd/gen/users/v1/usersv1connect"
	"usersd/store/sqlstore"
)

// TestWatchesAreTheLastingRequests: Lasting, which keeps the watches off the HTTP/2 workers of
// package warmstack, holds for every stream route and for nothing else.
func TestWatchesAreTheLastingRequests(t *testing.T) {
	st, err := sqlstore.Open(context.Background(), filepath.Join(t.TempDir(), "users.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s, err := New(Config{Store: st, Keys: testKeys("k"), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	streams := 0
	for _, r := range s.routes {
		if r.stream {
			streams++
		}
	}
	if streams < 3 {
		t.Fatalf("%d stream routes; want at least the SSE feed, WatchUsers and gRPC health's Watch", streams)
	}
	for path, lasting := range map[string]bool{
		"/users/events":                         true,
		usersv1connect.UsersWatchUsersProcedure: true,
		"/grpc.health.v1.Health/Watch":          true,
		"/users/1":                              false,
		usersv1connect.UsersGetUserProcedure:    false,
		"/grpc.health.v1.Health/Check":          false,
		"/scim/v2/Users":                        false,
	} {
		if got := s.Lasting(httptest.NewRequest("GET", path, nil)); got != lasting {
			t.Errorf("Lasting(%s) = %v, want %v", path, got, lasting)
		}
	}
	if len(s.streamPaths) != streams {
		t.Errorf("%d lasting paths for %d stream routes", len(s.streamPaths), streams)
	}
}
