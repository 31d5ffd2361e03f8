package sqlstore_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"usersd/store"
	"usersd/store/sqlstore"
	"usersd/store/storetest"
)

func TestSQLiteWithUserCacheConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, now func() time.Time) store.Store {
		return store.WithUserCache(open(t, filepath.Join(t.TempDir(), "users.db"), sqlstore.WithClock(now)), 4)
	})
}

// TestTheUserCacheNeverKeepsAStaleUser races readers against writers on a few users, with a cache
// small enough to evict: afterwards every user reads through the cache exactly as it is stored.
func TestTheUserCacheNeverKeepsAStaleUser(t *testing.T) {
	ctx := context.Background()
	db := open(t, filepath.Join(t.TempDir(), "users.db"))
	defer db.Close()
	cached := store.WithUserCache(db, 3)
	var ids []int32
	for i := range 5 {
		u, err := cached.CreateUser(ctx, store.NewUser{Name: fmt.Sprint("user ", i)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, u.ID)
	}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 50 {
				role := fmt.Sprintf("writer %d round %d", w, i)
				if _, err := cached.UpdateUser(ctx, ids[(w+i)%len(ids)], store.UserChanges{Role: &role}, nil); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	for r := range 4 {
		wg.Go(func() {
			for i := range 500 {
				if _, err := cached.GetUser(ctx, ids[(r+i)%len(ids)]); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	for _, id := range ids {
		fromCache, err1 := cached.GetUser(ctx, id)
		stored, err2 := db.GetUser(ctx, id)
		if err1 != nil || err2 != nil || fromCache.Version != stored.Version || fromCache.Role != stored.Role {
			t.Errorf("user %d: the cache gives version %d (%q), the store holds version %d (%q)", id, fromCache.Version, fromCache.Role, stored.Version, stored.Role)
		}
	}
	if err := cached.DeleteUser(ctx, ids[0], nil); err != nil {
		t.Fatal(err)
	}
	if _, err := cached.GetUser(ctx, ids[0]); err == nil {
		t.Fatal("a deleted user still reads from the cache")
	}
}

// slowRead is the real store, except that GetUser waits at a gate after reading, so that a test can
// make a write finish between a read and the moment the cache would keep what it read.
type slowRead struct {
	store.Store
	read, release chan struct{}
}

func (s slowRead) GetUser(ctx context.Context, id int32) (store.User, error) {
	u, err := s.Store.GetUser(ctx, id)
	s.read <- struct{}{}
	<-s.release
	return u, err
}

// TestTheUserCacheDropsAReadThatAWriteOvertook: a read that saw the user before a write finished
// must not be cached after it, or the old user would be served until it is evicted.
func TestTheUserCacheDropsAReadThatAWriteOvertook(t *testing.T) {
	ctx := context.Background()
	db := open(t, filepath.Join(t.TempDir(), "users.db"))
	defer db.Close()
	u, err := db.CreateUser(ctx, store.NewUser{Name: "before"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	slow := slowRead{Store: db, read: make(chan struct{}), release: make(chan struct{})}
	cached := store.WithUserCache(slow, 10)
	done := make(chan store.User)
	go func() { old, _ := cached.GetUser(ctx, u.ID); done <- old }()
	<-slow.read // the read has the old user in hand
	name := "after"
	if _, err := cached.UpdateUser(ctx, u.ID, store.UserChanges{Name: &name}, nil); err != nil {
		t.Fatal(err)
	}
	close(slow.release)
	if old := <-done; old.Name != "before" {
		t.Fatalf("the overtaken read returned %q", old.Name)
	}
	go func() {
		for range slow.read { // later reads pass the gate at once
		}
	}()
	if got, err := cached.GetUser(ctx, u.ID); err != nil || got.Name != "after" {
		t.Fatalf("after the write the cache serves %q, %v; want the written user", got.Name, err)
	}
	close(slow.read)
}
