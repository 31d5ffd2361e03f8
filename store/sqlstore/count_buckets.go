// Keeping the bucket counts of count_ranges.go: their fold on SQLite, their first build from the
// users, and their rebuild by RecountUsers.
//
// One rule keeps them exact: the kept buckets plus the pending deltas equal the users not deleted,
// bucket by bucket. Writes append deltas; a fold moves deltas into the buckets in one transaction
// (on PostgreSQL a trigger on the deltas' DELETE does, whichever release folds); neither changes
// the difference between the two sides. So a build reads the users, the buckets and the deltas in
// one snapshot, and adds that difference to the buckets later, whatever was written or folded in
// between: it neither loses a write nor counts one twice, and holds back no writer.
package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// buildBucketsLockKey names the advisory lock that lets one PostgreSQL replica build the buckets
// at a time ("bucket" in ASCII).
const buildBucketsLockKey = 0x6275636b6574

// bucketKey is one row of user_count_buckets.
type bucketKey struct {
	kind, level, bucket int64
}

// bucketCounts are bucket rows and their counts.
type bucketCounts map[bucketKey]int64

// add counts delta users of key under every level of k.
func (c bucketCounts) add(k bucketKind, key, delta int64) {
	for level, shift := range k.shifts {
		c[bucketKey{k.kind, int64(level), key >> shift}] += delta
	}
}

// levelsTable is a table of k's levels (level, shift), in SQL that both backends take.
func levelsTable(k bucketKind) string {
	rows := make([]string, len(k.shifts))
	for level, shift := range k.shifts {
		rows[level] = fmt.Sprintf("SELECT %d AS level, %d AS shift", level, shift)
	}
	return "(" + strings.Join(rows, " UNION ALL ") + ")"
}

// countBucketsFrom is the statement that inserts the buckets of k counted from rows, a table
// with a column key and a column delta, into user_count_buckets, adding to the rows there are.
func countBucketsFrom(k bucketKind, rows string) string {
	return fmt.Sprintf(`INSERT INTO user_count_buckets (kind, level, bucket, n)
		SELECT %d, l.level, r.key >> l.shift, SUM(r.delta) FROM %s AS r, %s AS l
		WHERE r.key IS NOT NULL GROUP BY l.level, r.key >> l.shift
		ON CONFLICT (kind, level, bucket) DO UPDATE SET n = user_count_buckets.n + excluded.n`, k.kind, rows, levelsTable(k))
}

// markKeptCountsWhole is the row that keptCountsWhole looks for.
const markKeptCountsWhole = `INSERT INTO user_count_buckets (kind, level, bucket, n) VALUES (0, 0, 0, 1) ON CONFLICT DO NOTHING`

// recountBucketStatements rebuild the buckets and the filters' scopes from the users, for
// RecountUsers, which has emptied the deltas and the kept counts before.
func recountBucketStatements() []string {
	statements := []string{`DELETE FROM user_count_buckets`}
	for _, q := range filterScopesOfUsers {
		statements = append(statements, `INSERT INTO user_counts (scope, n) `+q)
	}
	for _, k := range bucketKinds {
		statements = append(statements, countBucketsFrom(k,
			`(SELECT `+k.column+` AS key, 1 AS delta FROM users WHERE delete_time IS NULL)`))
	}
	return append(statements, markKeptCountsWhole)
}

// foldBucketDeltasChunk is the most deltas one fold transaction moves. A fold holds SQLite's one
// writer; in chunks, the writes of requests go in between, and a backlog far larger than a second's
// writes (a bulk load beside the server) is folded in steps that each finish well within the
// fold's deadline, instead of one transaction that the deadline rolls back, again and again.
const foldBucketDeltasChunk = 4096

// foldBucketDeltas moves SQLite's bucket deltas (migration 0014) into the buckets, a chunk of the
// oldest at a time, each in one short write transaction, so that a count reads few of them. A
// reader's snapshot sees each delta or its part of the sum, never both or neither.
func foldBucketDeltas(ctx context.Context, writer *sql.DB) error {
	for {
		more, err := foldBucketDeltasOnce(ctx, writer)
		if err != nil || !more {
			return err
		}
	}
}

// foldBucketDeltasOnce folds the oldest foldBucketDeltasChunk deltas, and reports whether more
// may be waiting.
func foldBucketDeltasOnce(ctx context.Context, writer *sql.DB) (more bool, err error) {
	tx, err := writer.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer tx.Rollback()
	var last sql.NullInt64
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT MAX(seq), COUNT(*) FROM (SELECT seq FROM user_bucket_deltas ORDER BY seq LIMIT ?)`,
		foldBucketDeltasChunk).Scan(&last, &n); err != nil || !last.Valid {
		return false, err
	}
	for _, k := range bucketKinds {
		if _, err := tx.ExecContext(ctx, countBucketsFrom(k,
			`(SELECT `+k.deltaColumn+` AS key, delta FROM user_bucket_deltas WHERE seq <= ?)`), last.Int64); err != nil {
			return false, fmt.Errorf("fold bucket deltas: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM user_bucket_deltas WHERE seq <= ?`, last.Int64); err != nil {
		return false, fmt.Errorf("fold bucket deltas: %w", err)
	}
	return n == foldBucketDeltasChunk, tx.Commit()
}

// bucketsRetryEvery is how long a store waits before it tries again to build the buckets, when
// another replica is building them or the build failed.
const bucketsRetryEvery = time.Second

// buildBucketsUntilWhole builds the buckets if they are not whole yet (after the migration that
// made them), trying again until they are or the store closes. Counts read the users meanwhile.
func (s *Store) buildBucketsUntilWhole(ctx context.Context) {
	for {
		whole, err := s.buildCountBuckets(ctx)
		if whole {
			return
		}
		if err != nil {
			s.logger.Warn("build the count buckets", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(bucketsRetryEvery):
		}
	}
}

// keptCountsAreWhole reads, outside any snapshot, whether the kept counts have been built.
func (s *Store) keptCountsAreWhole(ctx context.Context) (bool, error) {
	var whole bool
	err := s.writer.QueryRowContext(ctx, `SELECT `+keptCountsWhole).Scan(&whole)
	return whole, err
}

// afterBuildSnapshot, when a test sets it, runs between a build's snapshot and its writes: the
// window in which writes must neither be lost nor counted twice.
var afterBuildSnapshot func(*Store)

// buildCountBuckets builds the buckets unless they are whole, and reports whether they are now.
// It reads one snapshot, without a write lock, and adds what the snapshot shows is missing from
// the buckets in short write transactions; the last one marks them whole (see the rule at the top).
// On PostgreSQL, the snapshot's transaction holds an advisory lock until the end, so that one
// replica builds at a time and RecountUsers waits for it; another replica's build reports false
// without an error. Within the process, rebuilding keeps RecountUsers out meanwhile.
func (s *Store) buildCountBuckets(ctx context.Context) (bool, error) {
	s.rebuilding.Lock() // RecountUsers' turn, in this process
	defer s.rebuilding.Unlock()
	// Most opens find the counts whole (a database made with them, or built before): one read,
	// and no snapshot or lock.
	if whole, err := s.keptCountsAreWhole(ctx); err != nil || whole {
		return whole, err
	}
	db, options := s.reader, sql.TxOptions{ReadOnly: true}
	if s.dialect == &postgresDialect {
		db, options = s.writer, sql.TxOptions{Isolation: sql.LevelRepeatableRead}
	}
	tx, err := db.BeginTx(ctx, &options)
	if err != nil {
		return false, err
	}
	defer tx.Rollback()
	if s.dialect == &postgresDialect {
		var ours bool
		if err := tx.QueryRowContext(ctx, `SELECT pg_try_advisory_xact_lock($1)`, int64(buildBucketsLockKey)).Scan(&ours); err != nil || !ours {
			return false, err
		}
		// The snapshot began with the lock's statement, before the lock was ours: a build that
		// ended in between (its marker committed, its lock released) is not in it, and building
		// from it would add that build's counts again. A read outside the snapshot sees it; none
		// can end later, the lock being ours. (On SQLite, rebuilding keeps builds apart.)
		if whole, err := s.keptCountsAreWhole(ctx); err != nil || whole {
			return whole, err
		}
	}
	missing, err := missingBuckets(ctx, tx, s.dialect)
	if err != nil {
		return false, fmt.Errorf("read the count buckets: %w", err)
	}
	missingScopes, err := missingFilterScopes(ctx, tx, s.dialect)
	if err != nil {
		return false, fmt.Errorf("read the filters' kept counts: %w", err)
	}
	if s.dialect != &postgresDialect {
		// SQLite's snapshot is done with; in memory, its connection is also the writer's.
		tx.Rollback()
	}
	if afterBuildSnapshot != nil {
		afterBuildSnapshot(s)
	}
	if err := s.addKeptCounts(ctx, missing, missingScopes); err != nil {
		return false, err
	}
	return true, nil
}

// missingBuckets is, in tx's snapshot, what the users count in each bucket less what the kept
// buckets and the pending deltas hold.
func missingBuckets(ctx context.Context, tx *sql.Tx, d *dialect) (bucketCounts, error) {
	missing := bucketCounts{}
	for _, k := range bucketKinds {
		rows, err := tx.QueryContext(ctx, fmt.Sprintf(`SELECT %s >> %d, COUNT(*) FROM users WHERE delete_time IS NULL GROUP BY 1`, k.column, k.shifts[0]))
		finest, err := rowsOf(rows, err, func(row scanner) (c [2]int64, err error) { return c, row.Scan(&c[0], &c[1]) })
		if err != nil {
			return nil, err
		}
		for _, c := range finest {
			for level, shift := range k.shifts {
				missing[bucketKey{k.kind, int64(level), c[0] >> (shift - k.shifts[0])}] += c[1]
			}
		}
	}
	rows, err := tx.QueryContext(ctx, `SELECT kind, level, bucket, n FROM user_count_buckets WHERE kind > 0`)
	kept, err := rowsOf(rows, err, func(row scanner) (c [4]int64, err error) { return c, row.Scan(&c[0], &c[1], &c[2], &c[3]) })
	if err != nil {
		return nil, err
	}
	for _, c := range kept {
		missing[bucketKey{c[0], c[1], c[2]}] -= c[3]
	}
	rows, err = tx.QueryContext(ctx, `SELECT user_id, created_at, delta FROM `+d.bucketDeltas+` AND user_id IS NOT NULL`)
	pending, err := rowsOf(rows, err, func(row scanner) (c [3]int64, err error) { return c, row.Scan(&c[0], &c[1], &c[2]) })
	if err != nil {
		return nil, err
	}
	for _, p := range pending {
		missing.add(idBuckets, p[0], -p[2])
		missing.add(createdAtBuckets, p[1], -p[2])
	}
	return missing, nil
}

// keptPerWrite is how many kept counts one write transaction of addKeptCounts adds to, so that
// each holds the writer (on SQLite) or the counts' rows (where folds wait) only briefly.
const keptPerWrite = 5000

// addKeptCounts adds counts to the kept buckets and scopes, in transactions of keptPerWrite rows,
// and marks them whole in the last. Until then counts do not read them, so the first ones may
// commit alone.
func (s *Store) addKeptCounts(ctx context.Context, buckets bucketCounts, scopes map[string]int64) error {
	var rows []keptRows
	for k, n := range buckets {
		if n != 0 {
			rows = append(rows, keptRows{s.dialect.addBuckets, []any{k.kind, k.level, k.bucket, n}})
		}
	}
	for scope, n := range scopes {
		if n != 0 {
			rows = append(rows, keptRows{s.dialect.addScopes, []any{scope, n}})
		}
	}
	for {
		batch := rows[:min(len(rows), keptPerWrite)]
		rows = rows[len(batch):]
		last := len(rows) == 0
		if err := s.addKeptRows(ctx, batch, last); err != nil || last {
			return err
		}
	}
}

// keptRows is one row to add to the kept counts, and the dialect's statement that adds such rows.
type keptRows struct {
	statement string
	row       []any
}

// addKeptRows adds one batch of rows in one transaction, one statement per kind of row, and with
// whole marks the kept counts whole in it.
func (s *Store) addKeptRows(ctx context.Context, rows []keptRows, whole bool) error {
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	byStatement := map[string][][]any{}
	for _, r := range rows {
		byStatement[r.statement] = append(byStatement[r.statement], r.row)
	}
	for statement, rows := range byStatement {
		encoded, err := json.Marshal(rows)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, statement, string(encoded)); err != nil {
			return fmt.Errorf("add to the kept counts: %w", err)
		}
	}
	if whole {
		if _, err := tx.ExecContext(ctx, markKeptCountsWhole); err != nil {
			return fmt.Errorf("mark the kept counts whole: %w", err)
		}
	}
	return tx.Commit()
}

// filterScopesOfUsers count, from the users not deleted, the scopes of count_scopes.go.
var filterScopesOfUsers = []string{
	`SELECT '` + inactiveScope + `', COUNT(*) FROM users WHERE delete_time IS NULL AND NOT active HAVING COUNT(*) > 0`,
	`SELECT 'label:' || l.key || '=' || l.value, COUNT(*) FROM user_labels AS l JOIN users AS u ON u.id = l.user_id
	 WHERE u.delete_time IS NULL GROUP BY l.key, l.value`,
	`SELECT 'labelkey:' || l.key, COUNT(*) FROM user_labels AS l JOIN users AS u ON u.id = l.user_id
	 WHERE u.delete_time IS NULL GROUP BY l.key`,
}

// keptFilterScopes is the condition of the scopes of count_scopes.go among the kept counts.
const keptFilterScopes = `(scope = '` + inactiveScope + `' OR scope LIKE 'label:%' OR scope LIKE 'labelkey:%')`

// missingFilterScopes is, in tx's snapshot, what the users count in each scope of count_scopes.go
// less what the kept counts and their pending deltas hold.
func missingFilterScopes(ctx context.Context, tx *sql.Tx, d *dialect) (map[string]int64, error) {
	queries := []struct {
		query string
		sign  int64
	}{
		{filterScopesOfUsers[0], 1},
		{filterScopesOfUsers[1], 1},
		{filterScopesOfUsers[2], 1},
		{`SELECT scope, n FROM user_counts WHERE ` + keptFilterScopes, -1},
	}
	if d == &postgresDialect {
		queries = append(queries, struct {
			query string
			sign  int64
		}{`SELECT scope, SUM(delta) FROM user_count_deltas WHERE ` + keptFilterScopes + ` GROUP BY scope`, -1})
	}
	missing := map[string]int64{}
	for _, q := range queries {
		rows, err := tx.QueryContext(ctx, q.query)
		counts, err := rowsOf(rows, err, func(row scanner) (c struct {
			scope string
			n     int64
		}, err error) {
			return c, row.Scan(&c.scope, &c.n)
		})
		if err != nil {
			return nil, err
		}
		for _, c := range counts {
			missing[c.scope] += q.sign * c.n
		}
	}
	return missing, nil
}
