package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"time"

	"usersd/store"
)

const (
	// writeProbeEvery is how often, at most, Ping commits a write on PostgreSQL: a health check
	// that comes sooner gets the last probe's outcome.
	writeProbeEvery = time.Second
	// writeProbeTimeout is the probe's own deadline: a commit that waits longer (for a synchronous
	// standby that is gone, say) means that writes cannot commit.
	writeProbeTimeout = 1500 * time.Millisecond
)

// writeProbe tells whether a write commits on PostgreSQL. A server can answer, and be no standby,
// and still commit nothing: a primary promoted with a synchronous_standby_names that names a
// standby it no longer has waits for it at every commit. Only a commit shows that.
type writeProbe struct {
	mu      sync.Mutex
	running bool      // a probe is under way: callers meanwhile get the last outcome, never a second probe
	began   time.Time // when the last probe began
	err     error     // its outcome
}

// check returns whether a write commits on db, probing at most once every writeProbeEvery.
func (p *writeProbe) check(db *sql.DB) error {
	p.mu.Lock()
	switch {
	case p.running && time.Since(p.began) > writeProbeTimeout:
		p.mu.Unlock()
		return fmt.Errorf("%w: a write has not committed for %s", store.ErrUnavailable, time.Since(p.began).Round(time.Millisecond))
	case p.running || !p.began.IsZero() && time.Since(p.began) < writeProbeEvery:
		defer p.mu.Unlock()
		return p.err
	}
	p.running, p.began = true, time.Now()
	p.mu.Unlock()

	// Its own deadline, not the caller's: a probe ends as soon as it can tell.
	ctx, cancel := context.WithTimeout(context.Background(), writeProbeTimeout)
	defer cancel()
	// A transactional message of logical decoding is the smallest write there is: it takes a
	// transaction id and goes to the WAL, so its commit waits for a synchronous standby as any
	// write does, and it touches no table. On a standby it is not tried (CASE evaluates only the
	// branch it takes), so that the probe can say why no write commits, in the same round trip.
	var standby bool
	err := db.QueryRowContext(ctx, `SELECT CASE WHEN pg_is_in_recovery() THEN true
		ELSE pg_logical_emit_message(true, 'usersd-readiness', '') IS NULL END`).Scan(&standby)
	switch {
	case err != nil:
		err = fmt.Errorf("%w: a write did not commit: %v", store.ErrUnavailable, err)
	case standby:
		err = fmt.Errorf("%w: the database server is a standby and takes no writes", store.ErrUnavailable)
	}
	p.mu.Lock()
	p.running, p.err = false, err
	p.mu.Unlock()
	return err
}
