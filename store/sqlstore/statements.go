// The writer's prepared statements on SQLite: a write's statements are prepared once and kept.
package sqlstore

import (
	"context"
	"database/sql"
	"sync"
)

// maxKeptStatements bounds the statements kept: the writes' statements are a handful of constants,
// and the rest (a precondition on several versions, say) are prepared each time as before.
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

// keptStatements are the statements prepared on the writer, by their text, and the statements that
// writes ran without one. A statement cannot be prepared for keeping while a write's transaction
// holds the one writer connection, so the ones missing are prepared after it (prepareMissing).
type keptStatements struct {
	db      *sql.DB
	mu      sync.Mutex
	kept    map[string]*sql.Stmt
	missing map[string]bool
}

func newKeptStatements(db *sql.DB) *keptStatements {
	return &keptStatements{db: db, kept: map[string]*sql.Stmt{}, missing: map[string]bool{}}
}

// find returns the statement kept for query, or nil and notes it as missing.
func (k *keptStatements) find(query string) *sql.Stmt {
	if k == nil {
		return nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	st := k.kept[query]
	if st == nil && len(k.kept)+len(k.missing) < maxKeptStatements {
		k.missing[query] = true
	}
	return st
}

// prepareMissing prepares the statements that writes ran without one; it runs when no write holds
// the writer. A statement that fails to prepare is left to be prepared by each write, as before.
func (k *keptStatements) prepareMissing(ctx context.Context) {
	if k == nil {
		return
	}
	k.mu.Lock()
	missing := k.missing
	k.missing = map[string]bool{}
	k.mu.Unlock()
	for query := range missing {
		st, err := k.db.PrepareContext(ctx, query)
		if err != nil {
			continue
		}
		k.mu.Lock()
		k.kept[query] = st
		k.mu.Unlock()
	}
}
