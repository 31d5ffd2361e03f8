// Keeping PostgreSQL's user counts short to read: the deltas that writes append are folded into one
// row per scope, by one replica at a time, about once a second.
package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// foldCountsEvery is how often each replica folds the count deltas. A count reads the deltas of
// about this long, so it bounds the cost of a count under writes.
const foldCountsEvery = time.Second

// foldCountsLockKey names the advisory lock that lets one replica fold at a time ("counts" in ASCII).
const foldCountsLockKey = 0x636f756e7473

// foldCountDeltas moves the deltas that writes appended (migration 0007) into user_counts, in one
// statement: a reader's snapshot sees either the deltas or their sum, never both or neither, so a
// count is exact throughout. Deltas of writes still under way are not visible to the statement and
// stay for the next fold; a write never waits for a fold, since the fold only deletes rows whose
// writers have committed and updates rows that only folds update. Scopes whose count falls to zero
// are dropped, so roles that no user has any more leave nothing behind.
func foldCountDeltas(ctx context.Context, db *sql.DB) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var ours bool
	if err := tx.QueryRowContext(ctx, `SELECT pg_try_advisory_xact_lock($1)`, int64(foldCountsLockKey)).Scan(&ours); err != nil || !ours {
		return err // another replica is folding right now: its fold serves everyone
	}
	// At most a batch at a time, oldest first, so that a backlog is worked off in short statements.
	if _, err := tx.ExecContext(ctx, `
		WITH folded AS (
			DELETE FROM user_count_deltas
			WHERE seq IN (SELECT seq FROM user_count_deltas ORDER BY seq LIMIT 100000)
			RETURNING scope, delta
		)
		INSERT INTO user_counts (scope, n)
		SELECT scope, SUM(delta) FROM folded GROUP BY scope ORDER BY scope
		ON CONFLICT (scope) DO UPDATE SET n = user_counts.n + EXCLUDED.n`); err != nil {
		return fmt.Errorf("fold count deltas: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM user_counts WHERE n = 0 AND scope <> 'all'`); err != nil {
		return fmt.Errorf("drop empty counts: %w", err)
	}
	return tx.Commit()
}

// foldCountsUntilClosed runs the dialect's fold every foldCountsEvery until the store closes. A
// failed fold (the database unreachable, say) is tried again at the next tick: the counts stay
// exact meanwhile, only slower to read.
func (s *Store) foldCountsUntilClosed(ctx context.Context) {
	defer close(s.folded)
	ticker := time.NewTicker(foldCountsEvery)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			s.dialect.foldCounts(ctx, s.writer)
		}
	}
}
