package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"sync"
	"testing"
)

// TestAWriteAloneSharesItsTransactionWithNoOther queues writes alone among many ordinary ones, at
// once, and records the transaction each ran in: every write alone must have had its transaction
// to itself, and fail without a savepoint undoing only part of it, while the ordinary writes still
// share theirs.
func TestAWriteAloneSharesItsTransactionWithNoOther(t *testing.T) {
	ctx := context.Background()
	st, err := Open(ctx, filepath.Join(t.TempDir(), "users.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	none := func() error { return nil }
	c := newCommitter(st.writer, 1, DefaultWriteBatch, func(error) bool { return false }, none, none, nil)
	defer c.close()

	var mu sync.Mutex
	ranIn := map[*sql.Tx][]string{}
	record := func(name string) writeRun {
		return func(ctx context.Context, tx writeTx) error {
			mu.Lock()
			defer mu.Unlock()
			ranIn[tx.Tx] = append(ranIn[tx.Tx], name)
			return nil
		}
	}
	var wg sync.WaitGroup
	for round := range 8 {
		for i := range 16 {
			wg.Go(func() {
				if err := c.write(ctx, 8, record("ordinary")); err != nil {
					t.Error(err)
				}
			})
			if i == round {
				wg.Go(func() {
					if err := c.writeAlone(ctx, 8, record("alone")); err != nil {
						t.Error(err)
					}
				})
			}
		}
	}
	wg.Wait()
	alone, shared := 0, 0
	for _, writes := range ranIn {
		for _, name := range writes {
			if name == "alone" {
				alone++
				if len(writes) != 1 {
					t.Errorf("a write alone shared its transaction: %v", writes)
				}
			}
		}
		if len(writes) > 1 {
			shared++
		}
	}
	if alone != 8 {
		t.Errorf("%d writes alone ran, want 8", alone)
	}
	t.Logf("%d transactions, %d of them shared", len(ranIn), shared)

	// A write alone that fails leaves nothing of itself.
	if _, err := st.writer.ExecContext(ctx, `CREATE TABLE alone (i INTEGER PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	failed := errors.New("the second half failed")
	err = c.writeAlone(ctx, 8, func(ctx context.Context, tx writeTx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO alone (i) VALUES (1)`); err != nil {
			return err
		}
		return failed
	})
	var rows int
	if qerr := st.writer.QueryRowContext(ctx, `SELECT count(*) FROM alone`).Scan(&rows); qerr != nil || !errors.Is(err, failed) || rows != 0 {
		t.Errorf("a failed write alone: %v, %d rows (%v); want its error and no rows", err, rows, qerr)
	}
}
