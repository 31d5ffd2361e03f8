// Package sqlstore implements store.Store on database/sql. One implementation serves every SQL
// backend; what differs between them (driver, connection set-up, migrations) is in a dialect.
package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
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
	// pinger is a pool of one connection of its own for Ping, so that a health check never waits
	// behind the requests' queries for a connection: a busy store is not an unhealthy one.
	pinger *sql.DB
	// writes tells Ping whether a write commits, on PostgreSQL (writeprobe.go).
	writes writeProbe
	// pgConns keeps the connections of the PostgreSQL pools, for Close to wait until each has
	// finished closing (see pgConns).
	pgConns *pgConns
	// now is the clock; times are kept to the microsecond, the precision every backend stores.
	now func() time.Time
	// stopBackground ends the background work on the kept counts: the fold of the count deltas
	// (counts.go), if the dialect has one, and the build of the count buckets (count_buckets.go);
	// background waits for it to end.
	stopBackground context.CancelFunc
	background     sync.WaitGroup
	// rebuilding is held by a build of the count buckets and by RecountUsers, which must not
	// interleave.
	rebuilding sync.Mutex
	// file watches the SQLite file under the connections; nil where there is none to watch.
	file *fileGuard
	// notices wakes the readers of the change log when a change may have been added (events.go).
	notices notices
	// webhookTrims says when a subscription's history of attempts is trimmed (webhook_trims.go).
	webhookTrims webhookTrims
	// logger tells of trouble in the store's background work.
	logger *slog.Logger
	// direct is the URL that bypasses the pooler the store's URL goes through (see WithDirect);
	// "" when the store's URL is direct itself.
	direct string
	// standbyURLs and maxLag are the read standbys asked for (WithReadStandbys); standbys routes
	// the reads among them and the primary, nil when there are none.
	standbyURLs []string
	maxLag      time.Duration
	standbys    *standbys
	// maxWrites is the most writes one commit carries (WithWriteBatch); batches commits them, nil
	// when each write commits alone.
	maxWrites int
	batches   *committer
	// kept are the writer's prepared statements (statements.go); nil where none are kept.
	kept *keptStatements
}

var _ store.Store = (*Store)(nil)

// Option changes how Open sets up a Store.
type Option func(*Store)

// WithClock makes the store read the time from now instead of the system clock, so that tests can
// move time forward (to expire idempotency records, for example).
func WithClock(now func() time.Time) Option {
	return func(s *Store) { s.now = func() time.Time { return now().UTC().Truncate(time.Microsecond) } }
}

// WithDirect tells the store that dsn reaches PostgreSQL through a pooler in transaction mode
// (PgBouncer's default) and that direct is a URL of the same database that does not. What a pooler
// cannot carry uses direct: the migrations, under their session lock, and the LISTEN connection
// that wakes watchers at once. The pool through the pooler then runs every statement without a
// server-side prepared statement (pgx's exec mode), since the pooler may run a statement's
// preparation and its execution on different server connections, unless dsn names another
// default_query_exec_mode that works without them (describe_exec or simple_protocol).
func WithDirect(direct string) Option {
	return func(s *Store) { s.direct = direct }
}

// WithReadStandbys lets streaming-replication standbys of the PostgreSQL primary serve reads: a
// read that asks for a position (store.Freshness) from one that has replayed it, a read that asks
// for nothing from one that lags by at most maxLag, and every other read from the primary. Writes,
// and the reads that writes depend on, always go to the primary, as do the change log's reads
// (a watch must never read a stretch of the log older than one it has read).
func WithReadStandbys(urls []string, maxLag time.Duration) Option {
	return func(s *Store) { s.standbyURLs, s.maxLag = urls, maxLag }
}

// WithWriteBatch sets the most writes of users, posts and idempotency keys that one commit carries
// (DefaultWriteBatch unless set). Writes that arrive while a commit is under way wait for the next
// one together, each in a savepoint of its own; 1 commits every write alone, in the request's own
// transaction.
func WithWriteBatch(maxWrites int) Option {
	return func(s *Store) { s.maxWrites = maxWrites }
}

// WithLogger makes the store log trouble in its background work (the listener of other replicas'
// changes, on PostgreSQL) to logger instead of discarding it.
func WithLogger(logger *slog.Logger) Option {
	return func(s *Store) { s.logger = logger }
}

// Open opens the database that dsn names and brings its schema up to date. dsn is a PostgreSQL URL
// (postgres://...), or a SQLite file path (the file and its folder are created if needed) or
// ":memory:".
func Open(ctx context.Context, dsn string, opts ...Option) (*Store, error) {
	s := &Store{logger: slog.New(slog.DiscardHandler), maxWrites: DefaultWriteBatch, pgConns: new(pgConns)}
	WithClock(time.Now)(s)
	for _, opt := range opts {
		opt(s)
	}
	if s.maxWrites < 1 || s.maxWrites > DefaultWriteBatch {
		return nil, fmt.Errorf("a commit carries 1 to %d writes, not %d", DefaultWriteBatch, s.maxWrites)
	}
	if isPostgresURL(dsn) {
		db, err := openPostgres(ctx, dsn, s.direct != "", s.pgConns)
		if err != nil {
			return nil, err
		}
		s.dialect, s.reader, s.writer = &postgresDialect, db, db
		if s.pinger, _, err = newPostgresPool(dsn, s.direct != "", s.pgConns); err != nil {
			db.Close()
			return nil, err
		}
		s.pinger.SetMaxOpenConns(1)
		s.pinger.SetMaxIdleConns(1)
		config, err := listenConfig(cmp.Or(s.direct, dsn))
		if err != nil {
			db.Close()
			s.pinger.Close()
			return nil, fmt.Errorf("PostgreSQL URL: %w", err)
		}
		s.notices.listen = func(ctx context.Context, notify func()) { listenForChanges(ctx, config, notify, s.logger) }
		if len(s.standbyURLs) > 0 {
			if s.standbys, err = openStandbys(ctx, db, s.standbyURLs, s.maxLag, s.direct != "", s.pgConns, s.logger); err != nil {
				db.Close()
				s.pinger.Close()
				return nil, err
			}
		}
	} else {
		if s.direct != "" {
			return nil, errors.New("a direct URL is for PostgreSQL behind a pooler; a SQLite file has none")
		}
		if len(s.standbyURLs) > 0 {
			return nil, errors.New("read standbys are PostgreSQL's; a SQLite file has none")
		}
		reader, writer, pinger, err := openSQLite(dsn)
		if err != nil {
			return nil, err
		}
		s.dialect, s.reader, s.writer, s.pinger = &sqliteDialect, reader, writer, pinger
	}
	if err := s.migrateSchema(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("migrate %s: %w", s.dialect.name, err)
	}
	if s.dialect == &sqliteDialect && dsn != ":memory:" {
		// After the migrations, so that the write-ahead log exists; it lasts as long as a
		// connection is open, and the writer's always is.
		guard, err := newFileGuard(func() error { return emptyLog(s.writer) }, dsn, dsn+"-wal")
		if err != nil {
			s.Close()
			return nil, err
		}
		s.file = guard
	}
	if s.dialect == &sqliteDialect {
		s.kept = newKeptStatements(s.writer)
	}
	if s.maxWrites > 1 {
		s.batches = newCommitter(s.writer, s.dialect.committers, s.maxWrites, s.dialect.retryable, s.file.check, s.refuseWrite, s.kept)
	}
	var background context.Context
	background, s.stopBackground = context.WithCancel(context.WithoutCancel(ctx))
	if s.dialect.foldCounts != nil {
		s.background.Go(func() { s.foldCountsUntilClosed(background) })
	}
	s.background.Go(func() { s.buildBucketsUntilWhole(background) })
	return s, nil
}

// Shared reports whether other processes may write to the same database (PostgreSQL, shared by
// replicas), so that nothing read from it may be kept in memory. A SQLite file has one writer: this
// process.
func (s *Store) Shared() bool { return s.dialect == &postgresDialect }

// System names the database as OpenTelemetry's db.system.name does: "sqlite" or "postgresql".
func (s *Store) System() string {
	if s.dialect == &postgresDialect {
		return "postgresql"
	}
	return "sqlite"
}

// Pools returns the store's connection pools by name, for their statistics: "reader" and
// "writer" on SQLite, where writes have a pool of their own, and "postgres" where one pool does both.
func (s *Store) Pools() map[string]*sql.DB {
	if s.reader != s.writer {
		return map[string]*sql.DB{"reader": s.reader, "writer": s.writer}
	}
	pools := map[string]*sql.DB{s.dialect.name: s.reader}
	if s.standbys != nil {
		for _, sb := range s.standbys.list {
			pools["standby "+sb.name] = sb.db
		}
	}
	return pools
}

// Position returns the primary's position with read standbys, and 0 without: then every read that
// asks for a position is the primary's, and none needs to know one.
func (s *Store) Position(ctx context.Context) (_ store.Position, err error) {
	if s.standbys == nil {
		return 0, nil
	}
	defer s.classify(ctx, &err)
	return primaryPosition(ctx, s.writer)
}

// Ping reports whether the database answers and takes writes: on PostgreSQL that a write commits (probed at most once a second, writeprobe.go); on SQLite that its file
// is still the one open.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.file.check(); err != nil {
		return err
	}
	if s.dialect != &postgresDialect {
		if err := s.pinger.PingContext(ctx); err != nil {
			return fmt.Errorf("%w: %v", store.ErrUnavailable, err)
		}
		return nil
	}
	// A server that answers may still take no writes: a standby (a former primary brought back
	// after a failover, say, that the URL's hosts led to), or a primary whose commits wait for a
	// synchronous standby it no longer has. Only a commit tells, and on a standby it fails at once
	// (25006). The probe is the whole check, one round trip bounded by its own deadline, so that a
	// health check answers within it even while a pooler holds every statement.
	return s.writes.check(s.pinger)
}

// classify marks an error that means the database cannot be reached right now with
// store.ErrUnavailable, so that the client is told to retry rather than shown a fault, and an error
// of a request that ended (the client left, or its deadline passed) with the context's error.
// Every method that reads defers it on its error; a request's write goes through write, and the
// other writes (sweeps, the release of a key) defer classifyWrite.
func (s *Store) classify(ctx context.Context, err *error) {
	// A read that failed may have failed because the SQLite file went (a new connection cannot
	// open it), so it looks at the file; one that worked takes the last finding, which is free.
	if *err != nil {
		failIfLost(err, s.file.check())
	} else {
		failIfLost(err, s.file.lastFinding())
	}
	s.classifyError(ctx, err)
}

// classifyWrite is classify for a method that writes outside write, which it mirrors: it looks at
// the SQLite file after the write. Such a method first calls refuseWrite (all but AbandonRequest,
// which says why).
func (s *Store) classifyWrite(ctx context.Context, err *error) {
	failIfLost(err, s.file.check())
	s.classifyError(ctx, err)
}

// refuseWrite returns an error if the SQLite file is known to be lost, so that a write does not
// even start into it; it is the last finding, which costs nothing.
func (s *Store) refuseWrite() error { return s.file.lastFinding() }

// failIfLost makes a finding that the file is lost the error, keeping the statement's own words.
func failIfLost(err *error, lost error) {
	switch {
	case lost == nil:
	case *err == nil:
		*err = lost
	default:
		*err = fmt.Errorf("%w (the statement said: %w)", lost, *err)
	}
}

func (s *Store) classifyError(ctx context.Context, err *error) {
	switch {
	case *err == nil, errors.Is(*err, store.ErrUnavailable):
	case errors.Is(*err, context.Canceled), errors.Is(*err, context.DeadlineExceeded):
		// The error says already that the request ended.
	case ctx.Err() != nil:
		// The request ended while a statement ran. Drivers say so in their own words (SQLite
		// "interrupted (9)", database/sql "transaction has already been committed or rolled back"
		// when the context rolled it back), which would read as a fault of the service.
		*err = fmt.Errorf("%w: %w", ctx.Err(), *err)
	case s.dialect.unavailable(*err):
		*err = fmt.Errorf("%w: %w", store.ErrUnavailable, *err)
	}
}

// Close stops the background work and closes every connection; it waits for queries under way to
// finish.
func (s *Store) Close() error {
	if s.batches != nil {
		s.batches.close()
	}
	s.kept.close()
	s.file.close()
	s.notices.close()
	var err error
	inUse := 0 // connections that requests still hold
	if s.standbys != nil {
		inUse, err = s.standbys.close()
	}
	if s.stopBackground != nil {
		s.stopBackground()
		s.background.Wait()
	}
	// A connection that a request still holds (a drain cut short) closes only when the request
	// lets go of it: waiting for it would only delay a stop that was asked to be quick.
	inUse += s.reader.Stats().InUse + s.pinger.Stats().InUse
	if s.writer != s.reader {
		inUse += s.writer.Stats().InUse
	}
	err = errors.Join(err, s.reader.Close())
	if s.writer != s.reader {
		err = errors.Join(err, s.writer.Close())
	}
	if s.pinger != s.reader {
		err = errors.Join(err, s.pinger.Close())
	}
	if inUse == 0 {
		s.pgConns.wait(closeWait)
	}
	return err
}

// onReader runs read on the database that serves the reads of ctx: the reader, or with read
// standbys the one that the freshness of ctx allows (see standbys.pick). A standby that fails the
// read for want of a connection is passed over, and the primary runs read again, so that a standby
// going down costs a read some time but never an error.
func (s *Store) onReader(ctx context.Context, read func(*sql.DB) error) error {
	if s.standbys == nil {
		return read(s.reader)
	}
	db, sb := s.standbys.pick(ctx, store.FreshnessOf(ctx))
	err := read(db)
	if err != nil && sb != nil && ctx.Err() == nil && s.dialect.unavailable(err) {
		s.logger.Warn("read standby failed a read; the primary serves it", "standby", sb.name, "error", err)
		return read(s.standbys.failed(sb))
	}
	return err
}

// inReadTx runs fn in one read transaction, so that what it reads (a page and its total) is one
// consistent snapshot, on the database that onReader picks. fn may run twice, and must then start
// over.
func (s *Store) inReadTx(ctx context.Context, fn func(*sql.Tx) error) error {
	return s.onReader(ctx, func(db *sql.DB) error { return inTx(ctx, db, &s.dialect.snapshot, fn) })
}

// write runs one request's write: in a savepoint of the next batch's transaction (batch.go), or
// alone in a transaction of its own when writes are not batched. Everything it writes is committed
// together or not at all, and it returns only once that commit is durable. size is the bytes of
// the values it writes, which bound a batch. Like every method that writes, it first refuses a
// lost SQLite file, and then looks at the file after the write: a write that went into a file no
// longer at its path would be lost at restart, so it must not be acknowledged. (Such a write is in
// the lost file, answered unavailable, and a client that retries with its idempotency key cannot
// get it twice.)
func (s *Store) write(ctx context.Context, size int, run writeRun) (err error) {
	return s.writeIn(ctx, size, false, run)
}

// writeAlone is write in a transaction that carries no other write (committer.writeAlone), for a
// write of many changes that must commit or fail together.
func (s *Store) writeAlone(ctx context.Context, size int, run writeRun) (err error) {
	return s.writeIn(ctx, size, true, run)
}

// writeIn is write, alone in its transaction if alone.
func (s *Store) writeIn(ctx context.Context, size int, alone bool, run writeRun) (err error) {
	if err := s.refuseWrite(); err != nil {
		return err
	}
	defer s.classifyError(ctx, &err)
	if s.batches != nil {
		if alone {
			return s.batches.writeAlone(ctx, size, run)
		}
		return s.batches.write(ctx, size, run) // which looks at the file once per batch
	}
	defer func() { failIfLost(&err, s.file.check()) }()
	defer s.kept.prepareMissingLater()
	return inTx(ctx, s.writer, nil, func(tx *sql.Tx) error { return runSafely(ctx, writeTx{tx, s.kept}, run) })
}

// beginAttempts is how often inTx asks for a transaction while the pool hands it dead connections.
// pgx stops a statement whose request ended by closing its connection, so clients that leave all at
// once leave a pool of dead connections. Each ask of database/sql tries three (two it finds idle,
// then one opened or handed over by another request), and a PostgreSQL pool holds 16
// (newPostgresPool): six asks get through all of them.
const beginAttempts = 6

// inTx runs fn in a transaction of db with opts, committed if fn succeeds and rolled back if not.
func inTx(ctx context.Context, db *sql.DB, opts *sql.TxOptions, fn func(*sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, opts)
	for attempt := 1; errors.Is(err, driver.ErrBadConn) && attempt < beginAttempts; attempt++ {
		tx, err = db.BeginTx(ctx, opts) // nothing was sent: asking again is safe
	}
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// placeholder is the n-th query parameter, numbered from 1: "$n", the form PostgreSQL takes and
// the SQLite driver binds by the same number.
func placeholder(n int) string { return "$" + strconv.Itoa(n) }

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
