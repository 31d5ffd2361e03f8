// Conformance cases for idempotency records (docs/API.md#safe-retries-and-concurrent-edits).
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"usersd/store"
)

var (
	aliceKey = store.RequestKey{Caller: "alice", Key: "key-1"}
	hashA    = []byte("hash of request A")
	hashB    = []byte("hash of request B")
)

// keepUser completes r with an answer that names the created user.
func keepUser(r store.Reservation) *store.Completion[store.User] {
	return &store.Completion[store.User]{Reservation: r, Answer: func(u store.User) (store.Answer, error) {
		return store.Answer{Body: fmt.Appendf(nil, "user %d", u.ID)}, nil
	}}
}

func mustBegin(t *testing.T, s store.Store, key store.RequestKey, hash []byte) store.Reservation {
	t.Helper()
	r, answer, err := s.BeginRequest(context.Background(), key, hash)
	if err != nil || answer != nil || r.Token == "" {
		t.Fatalf("begin %+v: reservation %+v, answer %+v, %v; want a new reservation", key, r, answer, err)
	}
	return r
}

func wantAnswer(t *testing.T, s store.Store, key store.RequestKey, hash []byte, want store.Answer) {
	t.Helper()
	r, answer, err := s.BeginRequest(context.Background(), key, hash)
	if err != nil || answer == nil || !bytes.Equal(answer.Body, want.Body) || r.Token != "" {
		t.Fatalf("repeat %+v: reservation %+v, answer %+v, %v; want the kept answer %q", key, r, answer, err, want.Body)
	}
}

func wantBeginError(t *testing.T, s store.Store, key store.RequestKey, hash []byte, want error) {
	t.Helper()
	r, answer, err := s.BeginRequest(context.Background(), key, hash)
	if !errors.Is(err, want) || answer != nil || r.Token != "" {
		t.Fatalf("begin %+v: reservation %+v, answer %+v, %v; want %v", key, r, answer, err, want)
	}
}

func testIdempotentCreate(t *testing.T, s store.Store) {
	ctx := context.Background()
	r := mustBegin(t, s, aliceKey, hashA)
	u, err := s.CreateUser(ctx, store.NewUser{Name: "once"}, keepUser(r))
	if err != nil {
		t.Fatal(err)
	}
	want := store.Answer{Body: fmt.Appendf(nil, "user %d", u.ID)}
	wantAnswer(t, s, aliceKey, hashA, want)
	wantAnswer(t, s, aliceKey, hashA, want) // a repeat leaves the answer as it was
	wantBeginError(t, s, aliceKey, hashB, store.ErrRequestMismatch)

	// The same key of another caller, or another key of the same caller, is another request.
	mustBegin(t, s, store.RequestKey{Caller: "bob", Key: aliceKey.Key}, hashA)
	mustBegin(t, s, store.RequestKey{Caller: aliceKey.Caller, Key: "key-2"}, hashA)
	if page := mustList(t, s, store.UserQuery{Limit: 10}); page.Total != 1 {
		t.Fatalf("%d users after one idempotent create and its repeats, want 1", page.Total)
	}
}

func testIdempotentPost(t *testing.T, s store.Store) {
	ctx := context.Background()
	u := mustCreate(t, s, "author", "")
	r := mustBegin(t, s, aliceKey, hashA)
	done := &store.Completion[store.Post]{Reservation: r, Answer: func(p store.Post) (store.Answer, error) {
		return store.Answer{Body: fmt.Appendf(nil, "post %d", p.ID)}, nil
	}}
	p, err := s.CreatePost(ctx, u.ID, store.NewPost{Title: "once"}, done)
	if err != nil {
		t.Fatal(err)
	}
	wantAnswer(t, s, aliceKey, hashA, store.Answer{Body: fmt.Appendf(nil, "post %d", p.ID)})

	// A create that fails keeps no answer and leaves the key to its request, which abandons it.
	other := store.RequestKey{Caller: aliceKey.Caller, Key: "for a missing user"}
	r = mustBegin(t, s, other, hashA)
	done.Reservation = r
	if _, err := s.CreatePost(ctx, 4242, store.NewPost{Title: "orphan"}, done); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("post for a missing user: %v, want ErrNotFound", err)
	}
	wantBeginError(t, s, other, hashA, store.ErrRequestInProgress)
	if err := s.AbandonRequest(ctx, r); err != nil {
		t.Fatal(err)
	}
	mustBegin(t, s, other, hashA)
}

func testRunningRequestHoldsItsKey(t *testing.T, s store.Store) {
	ctx := context.Background()
	r := mustBegin(t, s, aliceKey, hashA)
	wantBeginError(t, s, aliceKey, hashA, store.ErrRequestInProgress)
	wantBeginError(t, s, aliceKey, hashB, store.ErrRequestMismatch)
	if err := s.AbandonRequest(ctx, r); err != nil {
		t.Fatal(err)
	}
	if err := s.AbandonRequest(ctx, r); err != nil {
		t.Fatalf("abandoning twice: %v", err)
	}
	// Abandoned, the key is free again, even for another request.
	again := mustBegin(t, s, aliceKey, hashB)
	if again.Token == r.Token {
		t.Fatal("a new reservation has the token of the abandoned one")
	}
	// An old reservation cannot complete or release the new holder's key.
	if err := s.AbandonRequest(ctx, r); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateUser(ctx, store.NewUser{Name: "stale holder"}, keepUser(r)); !errors.Is(err, store.ErrRequestInProgress) {
		t.Fatalf("completing an abandoned reservation: %v, want ErrRequestInProgress", err)
	}
	wantBeginError(t, s, aliceKey, hashB, store.ErrRequestInProgress)
	if page := mustList(t, s, store.UserQuery{Limit: 10}); page.Total != 0 {
		t.Fatalf("a create whose completion failed left %d users, want 0", page.Total)
	}
}

func testConcurrentBeginRequest(t *testing.T, s store.Store) {
	const requests = 20
	var wg sync.WaitGroup
	reservations := make([]store.Reservation, requests)
	errs := make([]error, requests)
	for i := range requests {
		wg.Go(func() { reservations[i], _, errs[i] = s.BeginRequest(context.Background(), aliceKey, hashA) })
	}
	wg.Wait()
	taken := 0
	for i := range requests {
		switch {
		case errs[i] == nil && reservations[i].Token != "":
			taken++
		case !errors.Is(errs[i], store.ErrRequestInProgress):
			t.Errorf("request %d: %v, want a reservation or ErrRequestInProgress", i, errs[i])
		}
	}
	if taken != 1 {
		t.Fatalf("%d of %d concurrent requests took the key, want exactly 1", taken, requests)
	}
}

func testLeaseTakeover(t *testing.T, s store.Store, clock *Clock) {
	ctx := context.Background()
	first := mustBegin(t, s, aliceKey, hashA)
	clock.Advance(store.RequestLease - time.Second)
	wantBeginError(t, s, aliceKey, hashA, store.ErrRequestInProgress)
	clock.Advance(time.Second)
	second := mustBegin(t, s, aliceKey, hashA) // the first request's process is presumed dead

	if _, err := s.CreateUser(ctx, store.NewUser{Name: "late"}, keepUser(first)); !errors.Is(err, store.ErrRequestInProgress) {
		t.Fatalf("the first request completing after losing its key: %v, want ErrRequestInProgress", err)
	}
	u, err := s.CreateUser(ctx, store.NewUser{Name: "on time"}, keepUser(second))
	if err != nil {
		t.Fatal(err)
	}
	page := mustList(t, s, store.UserQuery{Limit: 10})
	if page.Total != 1 || page.Items[0].ID != u.ID {
		t.Fatalf("users %v, want only the one the key's holder created", describe(page.Items))
	}
	// A completed answer has no lease: it stays until it expires.
	clock.Advance(2 * store.RequestLease)
	wantAnswer(t, s, aliceKey, hashA, store.Answer{Body: fmt.Appendf(nil, "user %d", u.ID)})
}

func testRequestExpiry(t *testing.T, s store.Store, clock *Clock) {
	ctx := context.Background()
	keys := []store.RequestKey{{Caller: "alice", Key: "k1"}, {Caller: "alice", Key: "k2"}, {Caller: "bob", Key: "k1"}}
	for _, key := range keys {
		r := mustBegin(t, s, key, hashA)
		if _, err := s.CreateUser(ctx, store.NewUser{Name: key.Caller}, keepUser(r)); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := s.DeleteExpiredRequests(ctx, 10); n != 0 || err != nil {
		t.Fatalf("sweeping fresh records deleted %d, %v; want 0", n, err)
	}
	clock.Advance(store.RequestTTL)
	fresh := store.RequestKey{Caller: "carol", Key: "k1"}
	mustBegin(t, s, fresh, hashA)

	// An expired answer is gone for a repeat even before the sweeper deletes it.
	mustBegin(t, s, keys[0], hashB)
	for _, want := range []int{1, 1, 0} { // keys[1] and keys[2], one per batch of 1; keys[0] was taken anew
		if n, err := s.DeleteExpiredRequests(ctx, 1); n != want || err != nil {
			t.Fatalf("sweep in batches of 1 deleted %d, %v; want %d", n, err, want)
		}
	}
	wantBeginError(t, s, fresh, hashA, store.ErrRequestInProgress)
	wantBeginError(t, s, keys[0], hashB, store.ErrRequestInProgress)
}
