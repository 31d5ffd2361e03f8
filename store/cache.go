// An in-process cache of users for a store that one process owns alone (SQLite). Reads of a cached
// user skip the database; every write through the cache invalidates the user it touches.
package store

import (
	"context"
	"sync"
)

// WithUserCache returns s with GetUser served from memory for up to capacity users. It is correct
// only when every write to s goes through the returned Store, that is when no other process writes
// to the same database: use it for SQLite, never for a PostgreSQL that replicas share.
func WithUserCache(s Store, capacity int) Store {
	return &userCache{Store: s, capacity: capacity, users: make(map[int32]User, capacity)}
}

type userCache struct {
	Store
	capacity int

	mu    sync.Mutex
	users map[int32]User
	// writes counts finished writes. A read stores what it read only if no write finished while it
	// read, so a value read before a concurrent write can never be cached after it.
	writes uint64
}

func (c *userCache) GetUser(ctx context.Context, id int32) (User, error) {
	c.mu.Lock()
	if u, ok := c.users[id]; ok {
		c.mu.Unlock()
		return u, nil
	}
	writesBefore := c.writes
	c.mu.Unlock()

	u, err := c.Store.GetUser(ctx, id)
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
func (c *userCache) forget(id int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes++
	delete(c.users, id)
}

func (c *userCache) UpdateUser(ctx context.Context, id int32, changes UserChanges, ifVersion IfVersion) (User, error) {
	defer c.forget(id)
	return c.Store.UpdateUser(ctx, id, changes, ifVersion)
}

func (c *userCache) DeleteUser(ctx context.Context, id int32, ifVersion IfVersion) error {
	defer c.forget(id)
	return c.Store.DeleteUser(ctx, id, ifVersion)
}
