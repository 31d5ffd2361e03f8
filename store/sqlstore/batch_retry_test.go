package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestWritesThatLoseADeadlockAreRetriedByLaterBatches drives the committer's retries on a real
// SQLite file. A deadlock with another replica's batch happens only on PostgreSQL and cannot be
// made to order, so the writes here report an error that the committer is told to retry, as it is
// told to retry PostgreSQL's 40P01: 32 writes at once, each losing its first two attempts, and one
// that loses every attempt. Each retried write goes back to the queue, and its goroutine may be the
// one handed the connection to lead the next batch. Every write must end with its own outcome, each
// row be written once, and the committer close with no batch left under way. With four committing
// connections (as on PostgreSQL; here they take turns on SQLite's one writer) a leader also takes
// writes appointed to lead, which may then be put back and appointed again; with batches of three
// a leader's own write may be left behind its batch.
func TestWritesThatLoseADeadlockAreRetriedByLaterBatches(t *testing.T) {
	for _, shape := range []struct{ connections, maxWrites int }{{1, DefaultWriteBatch}, {4, DefaultWriteBatch}, {4, 3}} {
		t.Run(fmt.Sprintf("connections=%d,batch=%d", shape.connections, shape.maxWrites), func(t *testing.T) {
			testRetriedWrites(t, shape.connections, shape.maxWrites)
		})
	}
}

func testRetriedWrites(t *testing.T, connections, maxWrites int) {
	ctx := context.Background()
	st, err := Open(ctx, filepath.Join(t.TempDir(), "users.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.writer.ExecContext(ctx, `CREATE TABLE retried (i INTEGER PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	errLost := errors.New("lost a deadlock")
	none := func() error { return nil }
	c := newCommitter(st.writer, connections, maxWrites, func(err error) bool { return errors.Is(err, errLost) }, none, none, nil)

	const writes = 32
	var attempts [writes]atomic.Int32
	outcomes := make([]error, writes)
	var wg sync.WaitGroup
	for i := range writes {
		wg.Go(func() {
			outcomes[i] = c.write(ctx, 8, func(ctx context.Context, tx writeTx) error {
				if n := attempts[i].Add(1); i == 0 || n <= 2 {
					return errLost
				}
				_, err := tx.ExecContext(ctx, `INSERT INTO retried (i) VALUES ($1)`, i)
				return err
			})
		})
	}
	wg.Wait()

	if !errors.Is(outcomes[0], errLost) || attempts[0].Load() != maxWriteRetries+1 {
		t.Errorf("the write that always loses: %v after %d attempts, want %v after %d", outcomes[0], attempts[0].Load(), errLost, maxWriteRetries+1)
	}
	for i := 1; i < writes; i++ {
		if outcomes[i] != nil || attempts[i].Load() != 3 {
			t.Errorf("write %d: %v after %d attempts, want success on the third", i, outcomes[i], attempts[i].Load())
		}
	}
	var rows, distinct int
	if err := st.writer.QueryRowContext(ctx, `SELECT count(*), count(DISTINCT i) FROM retried`).Scan(&rows, &distinct); err != nil {
		t.Fatal(err)
	}
	if rows != writes-1 || distinct != writes-1 {
		t.Errorf("%d rows (%d distinct), want each of the %d writes that succeeded once", rows, distinct, writes-1)
	}

	closed := make(chan struct{})
	go func() { c.close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the committer did not close: a batch is still counted as under way")
	}
	c.mu.Lock()
	free, queued := c.free, len(c.queue)
	c.mu.Unlock()
	if free != connections || queued != 0 {
		t.Errorf("after the writes: %d connections free and %d writes queued, want %d and 0", free, queued, connections)
	}
	if err := c.write(ctx, 8, func(context.Context, writeTx) error { return nil }); !errors.Is(err, errStoreClosed) {
		t.Errorf("a write after close: %v, want %v", err, errStoreClosed)
	}
}
