// Package sqlstore implements store.Store on database/sql. One implementation serves every SQL
// backend; what differs between them (driver, connection set-up, migrations) is in a dialect.
package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"usersd/store"
)

// Store is a store.Store on a SQL database.
type Store struct {
	dialect *dialect
	// reader serves queries and writer serves writes. On SQLite the writer is one connection, so
	// concurrent writes queue in the pool (honouring their contexts) instead of failing with
	// SQLITE_BUSY, while WAL lets the readers run alongside it. Where one pool can do both, they are
	// the same *sql.DB.
	reader *sql.DB
	writer *sql.DB
	// now is the clock; times are kept to the microsecond, the precision every backend stores.
	now func() time.Time
}

var _ store.Store = (*Store)(nil)

// Open opens the database that dsn names, creating it and its schema if needed, and brings the
// schema up to date. dsn is a SQLite file path or ":memory:".
func Open(ctx context.Context, dsn string) (*Store, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		return nil, errors.New(`PostgreSQL URLs are not supported by this build yet: give a SQLite file path or ":memory:"`)
	}
	reader, writer, err := openSQLite(dsn)
	if err != nil {
		return nil, err
	}
	s := &Store{
		dialect: &sqliteDialect,
		reader:  reader,
		writer:  writer,
		now:     func() time.Time { return time.Now().UTC().Truncate(time.Microsecond) },
	}
	if err := s.migrate(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("migrate %s: %w", s.dialect.name, err)
	}
	return s, nil
}

// Ping reports whether the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.reader.PingContext(ctx); err != nil {
		return fmt.Errorf("%w: %v", store.ErrUnavailable, err)
	}
	return nil
}

// Close closes every connection; it waits for queries under way to finish.
func (s *Store) Close() error {
	err := s.reader.Close()
	if s.writer != s.reader {
		err = errors.Join(err, s.writer.Close())
	}
	return err
}

// inReadTx runs fn in one read transaction, so that what it reads (a page and its total) is one
// consistent snapshot.
func (s *Store) inReadTx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := s.reader.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}

// micros and fromMicros convert between time.Time and the stored form: Unix microseconds, UTC.
func micros(t time.Time) int64 { return t.UnixMicro() }

func fromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

// scanner is what *sql.Row and *sql.Rows have in common.
type scanner interface {
	Scan(dest ...any) error
}

// rowsOf collects every row of a query, each read by scan.
func rowsOf[T any](rows *sql.Rows, err error, scan func(scanner) (T, error)) ([]T, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var items []T
	for rows.Next() {
		item, err := scan(rows)
		if err != nil {
			return nil, err
		}
		items = append(items, item)
	}
	return items, rows.Err()
}
