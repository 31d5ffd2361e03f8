package sqlstore_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"usersd/store"
	"usersd/store/sqlstore"
	"usersd/store/storetest"
)

func TestSQLiteWithUserCacheConformance(t *testing.T) {
	t.Parallel() // a store of its own: see open in sqlite_test.go
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

// notWrites are the methods of store.Store that change nothing stored. Every other method writes,
// and TestEveryWriteThroughTheUserCacheIsSeen must have a case that calls it.
var notWrites = []string{"GetUser", "GetUserShowingDeleted", "BatchGetUsers", "ListUsers", "ListPosts", "UserEvents", "NotifyUserEvents", "Position", "Ping", "Close"}

// cacheWrite is one write through the cache, made while the cache holds user u.
type cacheWrite struct {
	name   string
	method string // the store.Store method that the case is for
	// write calls method on cached. It may write to db behind the cache first, to see what the
	// cache does on a write that fails.
	write func(ctx context.Context, cached, db store.Store, u store.User) error
	// wantErr is the error that write must return; nil for success.
	wantErr error
	// changesUser says whether, afterwards, the stored u differs from the u the cache held.
	changesUser bool
}

var cacheWrites = []cacheWrite{
	{name: "a rename", method: "UpdateUser", changesUser: true,
		write: func(ctx context.Context, cached, _ store.Store, u store.User) error {
			name := "renamed"
			_, err := cached.UpdateUser(ctx, u.ID, store.UserChanges{Name: &name}, store.IfVersion{u.Version})
			return err
		}},
	{name: "an update that fails its precondition", method: "UpdateUser", changesUser: true, wantErr: store.ErrVersionMismatch,
		write: func(ctx context.Context, cached, db store.Store, u store.User) error {
			// Behind the cache's back, which only a test does: the failure is then the cache's
			// only chance to learn that the user it holds is stale.
			role := "changed elsewhere"
			if _, err := db.UpdateUser(ctx, u.ID, store.UserChanges{Role: &role}, nil); err != nil {
				return err
			}
			name := "renamed"
			_, err := cached.UpdateUser(ctx, u.ID, store.UserChanges{Name: &name}, store.IfVersion{u.Version})
			return err
		}},
	{name: "a delete", method: "DeleteUser", changesUser: true,
		write: func(ctx context.Context, cached, _ store.Store, u store.User) error {
			return cached.DeleteUser(ctx, u.ID, store.IfVersion{u.Version})
		}},
	{name: "a soft delete", method: "SoftDeleteUser", changesUser: true,
		write: func(ctx context.Context, cached, _ store.Store, u store.User) error {
			_, err := cached.SoftDeleteUser(ctx, u.ID, store.IfVersion{u.Version}, time.Now().Add(time.Hour))
			return err
		}},
	{name: "an undelete", method: "UndeleteUser", changesUser: true,
		write: func(ctx context.Context, cached, db store.Store, u store.User) error {
			// Behind the cache's back, as above: the undelete alone must make the cache forget.
			if _, err := db.SoftDeleteUser(ctx, u.ID, nil, time.Now().Add(time.Hour)); err != nil {
				return err
			}
			_, err := cached.UndeleteUser(ctx, u.ID, nil)
			return err
		}},
	{name: "a purge", method: "PurgeUser", changesUser: true,
		write: func(ctx context.Context, cached, _ store.Store, u store.User) error {
			return cached.PurgeUser(ctx, u.ID, store.IfVersion{u.Version})
		}},
	{name: "a purge of expired users, another one", method: "PurgeExpired",
		write: func(ctx context.Context, cached, _ store.Store, _ store.User) error {
			other, err := cached.CreateUser(ctx, store.NewUser{Name: "another"}, nil)
			if err != nil {
				return err
			}
			if _, err := cached.SoftDeleteUser(ctx, other.ID, nil, time.Now().Add(-time.Second)); err != nil {
				return err
			}
			if n, err := cached.PurgeExpired(ctx, time.Now(), 10); err != nil || n != 1 {
				return fmt.Errorf("purged %d, %w; want 1", n, err)
			}
			return nil
		}},
	{name: "a batch soft delete", method: "SoftDeleteUsers", changesUser: true,
		write: func(ctx context.Context, cached, _ store.Store, u store.User) error {
			_, err := cached.SoftDeleteUsers(ctx, []int32{u.ID}, time.Now().Add(time.Hour))
			return err
		}},
	{name: "a batch delete", method: "DeleteUsers", changesUser: true,
		write: func(ctx context.Context, cached, _ store.Store, u store.User) error {
			return cached.DeleteUsers(ctx, []int32{u.ID})
		}},
	{name: "a batch create of other users", method: "CreateUsers",
		write: func(ctx context.Context, cached, _ store.Store, _ store.User) error {
			_, err := cached.CreateUsers(ctx, []store.NewUser{{Name: "another"}, {Name: "and another"}}, nil)
			return err
		}},
	{name: "a create of another user", method: "CreateUser",
		write: func(ctx context.Context, cached, _ store.Store, _ store.User) error {
			_, err := cached.CreateUser(ctx, store.NewUser{Name: "another"}, nil)
			return err
		}},
	{name: "a post by the user", method: "CreatePost",
		write: func(ctx context.Context, cached, _ store.Store, u store.User) error {
			_, err := cached.CreatePost(ctx, u.ID, store.NewPost{Title: "hello"}, nil)
			return err
		}},
	{name: "a request begun and abandoned", method: "BeginRequest", // and AbandonRequest
		write: func(ctx context.Context, cached, _ store.Store, _ store.User) error {
			r, _, err := cached.BeginRequest(ctx, store.RequestKey{Caller: "caller", Key: "key"}, []byte("hash"))
			if err != nil {
				return err
			}
			return cached.AbandonRequest(ctx, r)
		}},
	{name: "an abandoned request that is no longer held", method: "AbandonRequest",
		write: func(ctx context.Context, cached, _ store.Store, _ store.User) error {
			return cached.AbandonRequest(ctx, store.Reservation{RequestKey: store.RequestKey{Caller: "caller", Key: "key"}, Token: "gone"})
		}},
	{name: "a sweep of expired requests", method: "DeleteExpiredRequests",
		write: func(ctx context.Context, cached, _ store.Store, _ store.User) error {
			_, err := cached.DeleteExpiredRequests(ctx, 10)
			return err
		}},
	{name: "a sweep of expired changes", method: "DeleteExpiredUserEvents",
		write: func(ctx context.Context, cached, _ store.Store, _ store.User) error {
			_, err := cached.DeleteExpiredUserEvents(ctx, 10)
			return err
		}},
}

// TestEveryWriteThroughTheUserCacheIsSeen holds a user in the cache, writes through the cache with
// each write method of store.Store in turn, and reads the user again: the cache must answer what the
// database holds, the new user or ErrNotFound. A method added to store.Store fails the test until it
// is listed in notWrites or has a case.
func TestEveryWriteThroughTheUserCacheIsSeen(t *testing.T) {
	covered := map[string]bool{}
	for _, name := range notWrites {
		covered[name] = true
	}
	for _, w := range cacheWrites {
		covered[w.method] = true
	}
	storeType := reflect.TypeFor[store.Store]()
	for m := range storeType.Methods() {
		if !covered[m.Name] {
			t.Errorf("store.Store.%s has no case here: add one, or list it in notWrites if it writes nothing", m.Name)
		}
		delete(covered, m.Name)
	}
	for name := range covered {
		t.Errorf("%s is listed here but is no method of store.Store", name)
	}

	for _, w := range cacheWrites {
		t.Run(w.method+": "+w.name, func(t *testing.T) {
			ctx := context.Background()
			db := open(t, filepath.Join(t.TempDir(), "users.db"))
			defer db.Close()
			cached := store.WithUserCache(db, 10)
			held, err := db.CreateUser(ctx, store.NewUser{Name: "held", Role: "reader"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := cached.GetUser(ctx, held.ID); err != nil { // now in the cache
				t.Fatal(err)
			}

			if err := w.write(ctx, cached, db, held); !errors.Is(err, w.wantErr) {
				t.Fatalf("the write: %v, want %v", err, w.wantErr)
			}

			stored, storedErr := db.GetUser(ctx, held.ID)
			if changed := storedErr != nil || stored.Version != held.Version; changed != w.changesUser {
				t.Fatalf("the stored user changed: %v (%+v, %v), want %v", changed, stored, storedErr, w.changesUser)
			}
			got, err := cached.GetUser(ctx, held.ID)
			if errors.Is(storedErr, store.ErrNotFound) {
				if !errors.Is(err, store.ErrNotFound) {
					t.Fatalf("the cache serves %+v, %v; want ErrNotFound, as the database says", got, err)
				}
				return
			}
			if err != nil || storedErr != nil || !reflect.DeepEqual(got, stored) {
				t.Fatalf("the cache serves %+v, %v; the database holds %+v, %v", got, err, stored, storedErr)
			}
		})
	}
}

// TestTheUserCacheServesAUserItRead shows that the cases above test something: a user the cache
// has read is served from memory, even after the database changed behind it.
func TestTheUserCacheServesAUserItRead(t *testing.T) {
	ctx := context.Background()
	db := open(t, filepath.Join(t.TempDir(), "users.db"))
	defer db.Close()
	cached := store.WithUserCache(db, 10)
	u, err := db.CreateUser(ctx, store.NewUser{Name: "held"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cached.GetUser(ctx, u.ID); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteUser(ctx, u.ID, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := cached.GetUser(ctx, u.ID); err != nil || !reflect.DeepEqual(got, u) {
		t.Fatalf("after a delete behind the cache: %+v, %v; want the user it read", got, err)
	}
}
