package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"testing"

	"usersd/handlers"
	"usersd/internal/apitest"
	"usersd/store"
	"usersd/store/sqlstore"
)

// heldStore is the real SQLite store, except that each create waits at a gate until the test lets
// it through. It holds a first request in flight, so that a test can send a repeat while the first
// is still running, a moment too short to hit on purpose otherwise.
type heldStore struct {
	store.Store
	arrived chan struct{} // receives once per create that reaches the gate
	release chan struct{} // each value lets one create through
}

func (h *heldStore) wait(ctx context.Context) error {
	h.arrived <- struct{}{}
	select {
	case <-h.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (h *heldStore) CreateUser(ctx context.Context, u store.NewUser, done *store.Completion[store.User]) (store.User, error) {
	if err := h.wait(ctx); err != nil {
		return store.User{}, err
	}
	return h.Store.CreateUser(ctx, u, done)
}

func (h *heldStore) CreatePost(ctx context.Context, userID int32, p store.NewPost, done *store.Completion[store.Post]) (store.Post, error) {
	if err := h.wait(ctx); err != nil {
		return store.Post{}, err
	}
	return h.Store.CreatePost(ctx, userID, p, done)
}

// startHeldServer serves the service's real handler and server settings on a loopback port, on a
// fresh SQLite file whose creates wait at the returned store's gate.
func startHeldServer(t *testing.T) (*testServer, *heldStore) {
	t.Helper()
	st, err := sqlstore.Open(t.Context(), filepath.Join(t.TempDir(), "users.db"))
	if err != nil {
		t.Fatal(err)
	}
	held := &heldStore{Store: st, arrived: make(chan struct{}, 16), release: make(chan struct{}, 16)}
	logger := slog.New(slog.NewJSONHandler(io.Discard, nil))
	handler, err := handlers.New(handlers.Config{Store: held, Keys: handlers.NewAPIKeys(apitest.Key), Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defaults, err := parseConfig(nil, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer(handler, defaults.limits, logger)
	go srv.Serve(listener)
	t.Cleanup(func() {
		apitest.HTTP1Client.CloseIdleConnections()
		apitest.H2CClient.CloseIdleConnections()
		srv.Close()
		st.Close()
	})
	return &testServer{baseURL: "http://" + listener.Addr().String(), logs: newLogWatcher(), stop: func() {}}, held
}
