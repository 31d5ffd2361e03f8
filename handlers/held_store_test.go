package handlers

import (
	"context"
	"path/filepath"
	"testing"

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

// startHeldServer serves the service's handler on a fresh SQLite file whose creates wait at the
// returned store's gate.
func startHeldServer(t *testing.T) (*testServer, *heldStore) {
	t.Helper()
	st, err := sqlstore.Open(t.Context(), filepath.Join(t.TempDir(), "users.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() }) // after the server's stop, which startServerWith's cleanup makes
	held := &heldStore{Store: st, arrived: make(chan struct{}, 16), release: make(chan struct{}, 16)}
	return startServerWith(t, Config{Store: held}), held
}
