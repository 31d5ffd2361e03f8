package sqlstore

import (
	"context"
	"database/sql"
	"math/rand/v2"
	"path/filepath"
	"testing"
)

// TestSQLiteFoldsABacklogAChunkAtATime: a backlog of bucket deltas several chunks long, as a bulk
// load beside the server leaves, is folded a chunk a transaction, oldest first, so that no fold
// holds the one writer for the whole backlog; and the totals are exact after it.
func TestSQLiteFoldsABacklogAChunkAtATime(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "users.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	waitForBuckets(t, s)
	s.Close() // its background fold would race the folds below

	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const users = 3*foldBucketDeltasChunk + 17
	if _, err := db.Exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $1)
		INSERT INTO users (name, name_key, role, created_at, updated_at) SELECT 'bulk ' || i, 'BULK ' || i, '', i * 977, i FROM n`, users); err != nil {
		t.Fatal(err)
	}
	pending := func() (n int, oldest sql.NullInt64) {
		if err := db.QueryRow(`SELECT COUNT(*), MIN(seq) FROM user_bucket_deltas`).Scan(&n, &oldest); err != nil {
			t.Fatal(err)
		}
		return n, oldest
	}
	for left := users; left > 0; left -= foldBucketDeltasChunk {
		_, oldestBefore := pending()
		more, err := foldBucketDeltasOnce(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		n, oldest := pending()
		if want := max(left-foldBucketDeltasChunk, 0); n != want || more != (left >= foldBucketDeltasChunk) {
			t.Fatalf("a fold of %d pending deltas left %d and said more=%v, want %d and more=%v", left, n, more, want, left >= foldBucketDeltasChunk)
		}
		if n > 0 && oldest.Int64 != oldestBefore.Int64+foldBucketDeltasChunk {
			t.Errorf("after a fold the oldest delta is %d, want the one a chunk after %d", oldest.Int64, oldestBefore.Int64)
		}
	}
	if more, err := foldBucketDeltasOnce(ctx, db); err != nil || more {
		t.Fatalf("a fold of no deltas: more=%v, %v", more, err)
	}

	s = openStore(t, path)
	var ids, times []int64
	for i := int64(1); i <= users; i++ {
		ids, times = append(ids, i), append(times, i*977)
	}
	wantExactTotals(t, s, "after the folds", randomRanges(rand.New(rand.NewPCG(7, 7)), ids, times, 60))
}
