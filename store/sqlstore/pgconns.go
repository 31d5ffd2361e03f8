package sqlstore

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// pgConns keeps the PostgreSQL connections a store's pools open, so that Close can wait for their
// last words. When a statement's context ends mid-statement, pgx closes the connection in the
// background: it sends the server a cancel request and waits for the server to hang up. A process
// that exits before that leaves the cancel request half sent, and PgBouncer 1.18 (Debian 12's),
// which forwards it, then stops with "bad client state" (pgbouncer#801), taking every replica's
// connections with it. A shutdown cancels the store's background statements, so it meets this
// every time a replica stops.
type pgConns struct {
	mu   sync.Mutex
	live []*pgconn.PgConn
}

// closeWait bounds how long Close waits for connections to finish closing: pgx gives up on a
// cancel request after 15 s, which is longer than a replica should take to stop.
const closeWait = 5 * time.Second

// track is the pools' AfterConnect hook: it adds conn, and forgets connections that are done.
func (c *pgConns) track(_ context.Context, conn *pgx.Conn) error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	kept := c.live[:0]
	for _, pc := range c.live {
		if !cleanedUp(pc) {
			kept = append(kept, pc)
		}
	}
	clear(c.live[len(kept):])
	c.live = append(kept, conn.PgConn())
	return nil
}

// wait returns once every tracked connection has finished closing, or after timeout. It is for
// after the pools are closed: a connection still in use never finishes.
func (c *pgConns) wait(timeout time.Duration) {
	if c == nil {
		return
	}
	c.mu.Lock()
	live := c.live
	c.live = nil
	c.mu.Unlock()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for _, pc := range live {
		select {
		case <-pc.CleanupDone():
		case <-deadline.C:
			return
		}
	}
}

func cleanedUp(pc *pgconn.PgConn) bool {
	select {
	case <-pc.CleanupDone():
		return true
	default:
		return false
	}
}
