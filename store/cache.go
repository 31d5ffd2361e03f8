// An in-process cache of users for a store that one process owns alone (SQLite). Reads of a cached
// user skip the database; every write through the cache invalidates the user it touches.
package store

import (
	"context"
	"sync"
	"time"
)

// WithUserCache returns s with GetUser served from memory for up to capacity users. It is correct
// only when every write to s goes through the returned Store, that is when no other process writes
// to the same database: use it for SQLite, never for a PostgreSQL that replicas share.
func WithUserCache(s Store, capacity int) *UserCache {
	return &UserCache{next: s, capacity: capacity, users: make(map[int32]User, capacity)}
}

// UserCache is a Store with GetUser served from memory (see WithUserCache).
//
// It names next rather than embedding it, and forwards every method of Store by hand: a
// method added to Store then fails to compile here until someone decides whether it must forget a
// user, instead of reaching the database past the cache and leaving a stale user in it.
type UserCache struct {
	next     Store
	capacity int

	mu    sync.Mutex
	users map[int32]User
	// writes counts finished writes. A read stores what it read only if no write finished while it
	// read, so a value read before a concurrent write can never be cached after it.
	writes uint64
	// hits and misses count the reads of GetUser, for Lookups.
	hits, misses uint64
}

// Lookups reports how many reads of GetUser the cache has answered (hits) and passed on (misses).
func (c *UserCache) Lookups() (hits, misses uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hits, c.misses
}

// Len reports how many users the cache holds.
func (c *UserCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.users)
}

var _ Store = (*UserCache)(nil)

func (c *UserCache) GetUser(ctx context.Context, id int32) (User, error) {
	c.mu.Lock()
	if u, ok := c.users[id]; ok {
		c.hits++
		c.mu.Unlock()
		return u, nil
	}
	c.misses++
	writesBefore := c.writes
	c.mu.Unlock()

	u, err := c.next.GetUser(ctx, id)
	if err != nil {
		return u, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.writes == writesBefore {
		if len(c.users) >= c.capacity {
			for evict := range c.users { // any one: map order is random enough for a bounded cache
				delete(c.users, evict)
				break
			}
		}
		c.users[id] = u
	}
	return u, nil
}

// forget drops the user after a write to it has finished (committed or failed).
func (c *UserCache) forget(id int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes++
	delete(c.users, id)
}

// forgetAll is forget for each of ids, as one write.
func (c *UserCache) forgetAll(ids []int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes++
	for _, id := range ids {
		delete(c.users, id)
	}
}

// BatchGetUsers reads past the cache: it is one statement however many users it reads, and the
// users it reads are not kept, so that a batch cannot evict the users that single reads keep.
func (c *UserCache) BatchGetUsers(ctx context.Context, ids []int32) ([]User, error) {
	return c.next.BatchGetUsers(ctx, ids)
}

// CreateUsers makes new users only, which no read can have cached (see CreateUser).
func (c *UserCache) CreateUsers(ctx context.Context, users []NewUser, done *Completion[[]User]) ([]User, error) {
	return c.next.CreateUsers(ctx, users, done)
}

func (c *UserCache) SoftDeleteUsers(ctx context.Context, ids []int32, purgeAt time.Time) ([]User, error) {
	defer c.forgetAll(ids)
	return c.next.SoftDeleteUsers(ctx, ids, purgeAt)
}

func (c *UserCache) DeleteUsers(ctx context.Context, ids []int32) error {
	defer c.forgetAll(ids)
	return c.next.DeleteUsers(ctx, ids)
}

// Writes that change a user forget it whether they succeed or fail: an error does not prove that
// nothing was written, and a reread costs one query.

func (c *UserCache) UpdateUser(ctx context.Context, id int32, changes UserChanges, ifVersion IfVersion) (User, error) {
	defer c.forget(id)
	return c.next.UpdateUser(ctx, id, changes, ifVersion)
}

func (c *UserCache) DeleteUser(ctx context.Context, id int32, ifVersion IfVersion) error {
	defer c.forget(id)
	return c.next.DeleteUser(ctx, id, ifVersion)
}

func (c *UserCache) SoftDeleteUser(ctx context.Context, id int32, ifVersion IfVersion, purgeAt time.Time) (User, error) {
	defer c.forget(id)
	return c.next.SoftDeleteUser(ctx, id, ifVersion, purgeAt)
}

func (c *UserCache) UndeleteUser(ctx context.Context, id int32, ifVersion IfVersion) (User, error) {
	defer c.forget(id)
	return c.next.UndeleteUser(ctx, id, ifVersion)
}

func (c *UserCache) PurgeUser(ctx context.Context, id int32, ifVersion IfVersion) error {
	defer c.forget(id)
	return c.next.PurgeUser(ctx, id, ifVersion)
}

// PurgeExpired purges only deleted users, which GetUser never finds, so none of them can be cached:
// a soft delete through the cache forgot the user, and a read of a deleted one keeps nothing.
func (c *UserCache) PurgeExpired(ctx context.Context, now time.Time, limit int) (int, error) {
	return c.next.PurgeExpired(ctx, now, limit)
}

// Writes that change no stored user forget nothing. A new user's id cannot be cached yet: a read
// of a missing user is not kept, and ids are never reused after a delete (the conformance suite
// holds every backend to that).

func (c *UserCache) CreateUser(ctx context.Context, u NewUser, done *Completion[User]) (User, error) {
	return c.next.CreateUser(ctx, u, done)
}

// CreatePost leaves the user row alone (no version bump), and a User holds nothing about its posts.
func (c *UserCache) CreatePost(ctx context.Context, userID int32, p NewPost, done *Completion[Post]) (Post, error) {
	return c.next.CreatePost(ctx, userID, p, done)
}

func (c *UserCache) BeginRequest(ctx context.Context, key RequestKey, hash []byte) (Reservation, *Answer, error) {
	return c.next.BeginRequest(ctx, key, hash)
}

func (c *UserCache) AbandonRequest(ctx context.Context, r Reservation) error {
	return c.next.AbandonRequest(ctx, r)
}

func (c *UserCache) DeleteExpiredRequests(ctx context.Context, limit int) (int, error) {
	return c.next.DeleteExpiredRequests(ctx, limit)
}

// Reads other than GetUser are not cached: lists change with every write to any user.

func (c *UserCache) ListUsers(ctx context.Context, q UserQuery) (Page[User], error) {
	return c.next.ListUsers(ctx, q)
}

// GetUserShowingDeleted is not cached: the cache holds what GetUser answers, which never is a
// deleted user.
func (c *UserCache) GetUserShowingDeleted(ctx context.Context, id int32) (User, error) {
	return c.next.GetUserShowingDeleted(ctx, id)
}

func (c *UserCache) ListPosts(ctx context.Context, userID int32, q PostQuery) (Page[Post], error) {
	return c.next.ListPosts(ctx, userID, q)
}

// The change log is read past the cache: it is its own record, and reading it changes no user.

func (c *UserCache) UserEvents(ctx context.Context, after int64, limit int) (UserEvents, error) {
	return c.next.UserEvents(ctx, after, limit)
}

func (c *UserCache) DeleteExpiredUserEvents(ctx context.Context, limit int) (int, error) {
	return c.next.DeleteExpiredUserEvents(ctx, limit)
}

func (c *UserCache) NotifyUserEvents(wake chan<- struct{}) (stop func()) {
	return c.next.NotifyUserEvents(wake)
}

func (c *UserCache) Position(ctx context.Context) (Position, error) { return c.next.Position(ctx) }

func (c *UserCache) Ping(ctx context.Context) error { return c.next.Ping(ctx) }

func (c *UserCache) Close() error { return c.next.Close() }
