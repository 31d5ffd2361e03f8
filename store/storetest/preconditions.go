// Conformance cases for conditional writes (etags; docs/API.md#safe-retries-and-concurrent-edits).
package storetest

import (
	"context"
	"errors"
	"sync"
	"testing"

	"usersd/store"
)

func testConditionalWrites(t *testing.T, s store.Store) {
	ctx := context.Background()
	u := mustCreate(t, s, "first", "")
	name := func(n string) store.UserChanges { return store.UserChanges{Name: &n} }

	updated, err := s.UpdateUser(ctx, u.ID, name("second"), store.IfVersion{1})
	if err != nil || updated.Version != 2 || updated.Name != "second" {
		t.Fatalf("update at the current version: %+v, %v; want version 2 named second", updated, err)
	}
	for _, stale := range []store.IfVersion{{1}, {}, {3, 4}} {
		if _, err := s.UpdateUser(ctx, u.ID, name("lost"), stale); !errors.Is(err, store.ErrVersionMismatch) {
			t.Errorf("update if version in %v at version 2: %v, want ErrVersionMismatch", stale, err)
		}
		if err := s.DeleteUser(ctx, u.ID, stale); !errors.Is(err, store.ErrVersionMismatch) {
			t.Errorf("delete if version in %v at version 2: %v, want ErrVersionMismatch", stale, err)
		}
	}
	if got, _ := s.GetUser(ctx, u.ID); !sameUser(got, updated) {
		t.Fatalf("after refused writes the user is %+v, want it unchanged: %+v", got, updated)
	}

	if _, err := s.UpdateUser(ctx, u.ID, name("third"), store.IfVersion{7, 2}); err != nil {
		t.Fatalf("update with the current version among others: %v", err)
	}
	const missing = 4242
	if _, err := s.UpdateUser(ctx, missing, name("x"), store.IfVersion{1}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("conditional update of a missing user: %v, want ErrNotFound", err)
	}
	if err := s.DeleteUser(ctx, missing, store.IfVersion{1}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("conditional delete of a missing user: %v, want ErrNotFound", err)
	}
	if err := s.DeleteUser(ctx, u.ID, store.IfVersion{3}); err != nil {
		t.Fatalf("delete at the current version: %v", err)
	}
	if _, err := s.GetUser(ctx, u.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("after a conditional delete the user still reads: %v", err)
	}
}

// testConcurrentConditionalWrites is the lost update in the store: many writers read version 1 and
// write conditioned on it; the check and the write must be one step, so only one may win.
func testConcurrentConditionalWrites(t *testing.T, s store.Store) {
	ctx := context.Background()
	u := mustCreate(t, s, "contended", "")
	const writers = 20
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for i := range writers {
		wg.Go(func() {
			role := string(rune('a' + i))
			_, errs[i] = s.UpdateUser(ctx, u.ID, store.UserChanges{Role: &role}, store.IfVersion{u.Version})
		})
	}
	wg.Wait()
	won := -1
	for i, err := range errs {
		switch {
		case err == nil && won >= 0:
			t.Fatalf("writers %d and %d both wrote at version %d", won, i, u.Version)
		case err == nil:
			won = i
		case !errors.Is(err, store.ErrVersionMismatch):
			t.Fatalf("writer %d: %v, want success or ErrVersionMismatch", i, err)
		}
	}
	got, _ := s.GetUser(ctx, u.ID)
	if won < 0 || got.Version != 2 || got.Role != string(rune('a'+won)) {
		t.Fatalf("after the race the user is %+v; winner %d", got, won)
	}
}
