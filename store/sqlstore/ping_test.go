package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"usersd/store"
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
			// The held connections stay held until the test ends, so a ping that waited for one
			// would wait out the timeout: 30 s, a hang detector where a second once stood, which a
			// machine busy compiling something else could break without any wait for a connection.
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			start := time.Now()
			if err := s.Ping(ctx); err != nil {
				t.Fatalf("ping with every query connection taken: %v after %v", err, time.Since(start))
			}
		})
	}
}

// TestPingFailsWhenTheServerTakesNoWrites: a URL that lists a standby after the primary, without
// target_session_attrs=read-write, reaches the standby once the primary stops. It answers, so a
// ping that only asked whether the server answers found the store healthy while every write failed.
func TestPingFailsWhenTheServerTakesNoWrites(t *testing.T) {
	t.Parallel() // a store of its own: see open in sqlite_test.go
	c := storetest.StartCluster(t)
	s := open(t, fmt.Sprintf("postgres://postgres@%s,%s/usersd?sslmode=disable&target_session_attrs=any",
		c.Primary.Hostport(), c.Async.Hostport()))
	defer s.Close()
	if err := s.Ping(t.Context()); err != nil {
		t.Fatalf("ping on the primary: %v", err)
	}
	c.Primary.Stop(t)
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := s.Ping(t.Context())
		if errors.Is(err, store.ErrUnavailable) && strings.Contains(err.Error(), "standby") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ping 10 s after the primary stopped, with only a standby to reach: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
