// The writer's prepared statements on SQLite: the statements of writes, and of the reads repeated on
// the writer, are prepared once and kept.
package sqlstore

import (
	"context"
	"database/sql"
	"sync"
	"time"
)

// maxKeptStatements bounds the statements kept: the writes' statements are a handful of constants;
// those whose text a client chooses are never kept (see writeTx.keepingIf).
const maxKeptStatements = 64

// writeTx is the transaction that a write runs in. On SQLite, preparing a statement (parsing it,
// and compiling every trigger it fires) costs about as much as running it, and the driver prepares
// every statement it is given afresh; so the statements that writes run are prepared once on the
// writer connection and kept. On PostgreSQL nothing is kept here: pgx keeps its own prepared
// statements, and through a pooler none may be kept at all.
type writeTx struct {
	*sql.Tx
	kept *keptStatements // nil: none kept
}

// keepingIf returns t, or t keeping no statements when keep is false: for a statement whose text the
// client chooses (a precondition on several versions has one for each count), which would otherwise
// fill the kept statements for good and leave the writes' own unkept.
func (t writeTx) keepingIf(keep bool) writeTx {
	if !keep {
		t.kept = nil
	}
	return t
}

// QueryRowContext is sql.Tx's, on a kept statement when there is one.
func (t writeTx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if st := t.kept.find(query); st != nil {
		return t.Tx.StmtContext(ctx, st).QueryRowContext(ctx, args...)
	}
	return t.Tx.QueryRowContext(ctx, query, args...)
}

// ExecContext is sql.Tx's, on a kept statement when there is one.
func (t writeTx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if st := t.kept.find(query); st != nil {
		return t.Tx.StmtContext(ctx, st).ExecContext(ctx, args...)
	}
	return t.Tx.ExecContext(ctx, query, args...)
}

// queryRowOnWriter runs a read on the writer connection, on a kept statement when there is one, so
// that a read repeated often there is parsed once: a deliverer reads its subscription after every
// page of the log. A statement not kept yet is prepared in the background.
func (s *Store) queryRowOnWriter(ctx context.Context, query string, args ...any) *sql.Row {
	if st := s.kept.find(query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	defer s.kept.prepareMissingLater()
	return s.writer.QueryRowContext(ctx, query, args...)
}

// keptStatements are the statements prepared on the writer, by their text, and the statements that
// writes ran without one. A statement cannot be prepared for keeping while a write's transaction
// holds the one writer connection, so the ones missing are prepared after it (prepareMissing).
type keptStatements struct {
	db *sql.DB
	mu sync.Mutex
	// kept are prepared; missing were run without one and wait to be prepared; failed could not
	// be prepared (a statement of another build's schema, say), and are not tried again. All
	// three together hold at most maxKeptStatements.
	kept            map[string]*sql.Stmt
	missing, failed map[string]bool
	closed          bool
	// preparing is set while prepareMissingLater's goroutine runs: one at a time waits for the
	// writer, however many reads and writes ask for it meanwhile.
	preparing bool
}

func newKeptStatements(db *sql.DB) *keptStatements {
	return &keptStatements{db: db, kept: map[string]*sql.Stmt{}, missing: map[string]bool{}, failed: map[string]bool{}}
}

// find returns the statement kept for query, or nil and notes it as missing.
func (k *keptStatements) find(query string) *sql.Stmt {
	if k == nil {
		return nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	st := k.kept[query]
	if st == nil && !k.failed[query] && len(k.kept)+len(k.missing)+len(k.failed) < maxKeptStatements {
		k.missing[query] = true
	}
	return st
}

// prepareMissing prepares the statements that writes ran without one; it runs when no write holds
// the writer (it waits for the connection otherwise), and at most for prepareTimeout.
func (k *keptStatements) prepareMissing() {
	if k == nil {
		return
	}
	k.mu.Lock()
	var missing []string
	for query := range k.missing {
		missing = append(missing, query)
	}
	k.mu.Unlock()
	if len(missing) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), prepareTimeout)
	defer cancel()
	for _, query := range missing {
		st, err := k.db.PrepareContext(ctx, query)
		k.mu.Lock()
		switch {
		case err != nil && ctx.Err() != nil:
			// Not the statement's fault: it stays missing, for the next time.
		case err != nil:
			delete(k.missing, query)
			k.failed[query] = true
		case k.closed || k.kept[query] != nil:
			st.Close() // the store closed, or another caller prepared it meanwhile
			delete(k.missing, query)
		default:
			delete(k.missing, query)
			k.kept[query] = st
		}
		k.mu.Unlock()
	}
}

// prepareTimeout bounds how long prepareMissing waits for the writer connection.
const prepareTimeout = 5 * time.Second

// prepareMissingLater prepares the missing statements in the background, if there are any, so
// that no request waits for it.
func (k *keptStatements) prepareMissingLater() {
	if k == nil {
		return
	}
	k.mu.Lock()
	start := len(k.missing) > 0 && !k.preparing
	if start {
		k.preparing = true
	}
	k.mu.Unlock()
	if start {
		go func() {
			k.prepareMissing()
			k.mu.Lock()
			k.preparing = false
			k.mu.Unlock()
		}()
	}
}

// close closes the kept statements.
func (k *keptStatements) close() {
	if k == nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.closed = true
	for query, st := range k.kept {
		st.Close()
		delete(k.kept, query)
	}
}
