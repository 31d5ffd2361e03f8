// Keeping PostgreSQL's user counts short to read: the deltas that writes append are folded into one
// row per scope, by one replica at a time, about once a second.
package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
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

// foldTimeout bounds one fold of the count deltas.
const foldTimeout = 10 * time.Second

// foldCountsUntilClosed runs the dialect's fold every foldCountsEvery until the store closes (on
// SQLite, the fold of the bucket deltas, count_buckets.go). A
// failed fold (the database unreachable, say) is tried again at the next tick: the counts stay
// exact meanwhile, only slower to read.
func (s *Store) foldCountsUntilClosed(ctx context.Context) {
	ticker := time.NewTicker(foldCountsEvery)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			if s.refuseWrite() != nil {
				continue // a SQLite file that is gone takes no write, as the requests' writes are refused
			}
			// A fold is short; one bounded by its own deadline cannot wait forever on a connection
			// that died without a word (a fold with none once waited six minutes in a ping).
			folding, cancel := context.WithTimeout(ctx, foldTimeout)
			s.dialect.foldCounts(folding, s.writer) // its failure is the outage's, which requests report
			cancel()
		}
	}
}

// recountStatements rebuild user_counts from the users themselves, by the rules the count
// triggers keep (migrations 0003 and 0012 on SQLite, 0007 and 0017 on PostgreSQL): one 'all' row and
// one 'role:<role>' row for each role that a user not deleted has, and their 'deleted:' twins for
// the deleted users, where there are any.
var recountStatements = []string{
	`DELETE FROM user_counts`,
	`INSERT INTO user_counts (scope, n) SELECT 'all', COUNT(*) FROM users WHERE delete_time IS NULL`,
	`INSERT INTO user_counts (scope, n) SELECT 'role:' || role, COUNT(*) FROM users WHERE delete_time IS NULL GROUP BY role`,
	`INSERT INTO user_counts (scope, n) SELECT 'deleted:all', COUNT(*) FROM users WHERE delete_time IS NOT NULL HAVING COUNT(*) > 0`,
	`INSERT INTO user_counts (scope, n) SELECT 'deleted:role:' || role, COUNT(*) FROM users WHERE delete_time IS NOT NULL GROUP BY role`,
}

// RecountUsers rebuilds the kept user counts from the users table, in one transaction, and returns
// them by scope ("all", "role:<role>"). A running store never needs it: the triggers keep the
// counts in each write's transaction. It is for a bulk load that went around the triggers, such as
// the benchmarks' seeder, which counts once at the end instead of once a row; nothing else may
// write meanwhile. On PostgreSQL it takes the fold's lock and empties the pending deltas, which the
// recount includes.
func (s *Store) RecountUsers(ctx context.Context) (map[string]int64, error) {
	s.rebuilding.Lock()
	defer s.rebuilding.Unlock()
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("recount users: %w", err)
	}
	defer tx.Rollback()
	statements := slices.Concat(recountStatements, recountBucketStatements())
	if s.dialect == &postgresDialect {
		// The build's lock too: a build under way would add to the buckets what its snapshot
		// found missing, after the recount.
		statements = append([]string{
			fmt.Sprintf(`SELECT pg_advisory_xact_lock(%d)`, int64(foldCountsLockKey)),
			fmt.Sprintf(`SELECT pg_advisory_xact_lock(%d)`, int64(buildBucketsLockKey)),
			`DELETE FROM user_count_deltas`,
		}, statements...)
	} else {
		statements = append([]string{`DELETE FROM user_bucket_deltas`}, statements...)
	}
	for _, stmt := range statements {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return nil, fmt.Errorf("recount users: %s: %w", stmt, err)
		}
	}
	rows, err := tx.QueryContext(ctx, `SELECT scope, n FROM user_counts`)
	if err != nil {
		return nil, fmt.Errorf("recount users: read user_counts: %w", err)
	}
	defer rows.Close()
	counts := map[string]int64{}
	for rows.Next() {
		var scope string
		var n int64
		if err := rows.Scan(&scope, &n); err != nil {
			return nil, fmt.Errorf("recount users: read user_counts: %w", err)
		}
		counts[scope] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("recount users: read user_counts: %w", err)
	}
	return counts, tx.Commit()
}
