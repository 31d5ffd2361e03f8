package sqlstore_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"usersd/store/storetest"
)

// TestPingDoesNotWaitBehindQueries takes every connection of the pool that serves the requests'
// queries, as a burst of slow lists would, and pings: a health check must still answer at once,
// since a busy store is not an unhealthy one. It once waited for a connection of that pool, and
// health checks failed under load.
func TestPingDoesNotWaitBehindQueries(t *testing.T) {
	for _, backend := range []struct {
		name string
		dsn  func(t *testing.T) string
		pool string
	}{
		{"sqlite", func(t *testing.T) string { return filepath.Join(t.TempDir(), "users.db") }, "reader"},
		{"postgres", func(t *testing.T) string { return storetest.PostgresSchema(t) }, "postgres"},
	} {
		t.Run(backend.name, func(t *testing.T) {
			s := open(t, backend.dsn(t))
			defer s.Close()
			pool := s.Pools()[backend.pool]
			var held []*sql.Conn
			defer func() {
				for _, c := range held {
					c.Close()
				}
			}()
			for range pool.Stats().MaxOpenConnections {
				c, err := pool.Conn(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				held = append(held, c)
			}
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			defer cancel()
			if err := s.Ping(ctx); err != nil {
				t.Fatalf("ping with every query connection taken: %v", err)
			}
		})
	}
}
