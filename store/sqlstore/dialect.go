// What differs between the SQL backends. Everything else (every query, the transactions, the
// idempotency records) is one implementation, written in SQL that both SQLite and PostgreSQL accept.
package sqlstore

import (
	"context"
	"database/sql"
)

// dialect holds what differs between SQL backends.
type dialect struct {
	name string
	// migrationsDir holds files named NNNN_description.sql, applied in the order of NNNN. Each
	// backend has its own files (column types differ); both build the same tables, except how the
	// user counts are kept (see countUsers).
	migrationsDir string
	// snapshot is the transaction that reads one consistent snapshot (a page and its total).
	snapshot sql.TxOptions
	// lockMigrations makes processes that start at once take turns to migrate; it returns the
	// function that lets the next one in.
	lockMigrations func(ctx context.Context, conn *sql.Conn) (unlock func() error, err error)
	// unavailable reports whether err means the database cannot be reached right now, so that the
	// request can be retried, as opposed to a fault in the request or in the service.
	unavailable func(err error) bool
	// committers is how many batches of writes may commit at once (see committer).
	committers int
	// retryable reports whether err is a write's that lost to a concurrent transaction (a
	// deadlock) and would not meet it again once that transaction ends.
	retryable func(err error) bool
	// foreignKeyViolation reports whether err is a write that referred to a row that is gone.
	foreignKeyViolation func(err error) bool
	// uniqueField names the field of a user whose unique index err broke (see unique.go); "" if
	// err is no such violation.
	uniqueField func(err error) string
	// forUpdate ends a read, in a write's transaction, of a row the write then changes: it locks the
	// row where writers run at once (PostgreSQL); SQLite has one writer anyway.
	forUpdate string
	// countUsers is the query of how many users have the role ("" for all users), deleted users
	// among them only with showDeleted, read in the same snapshot as the page it counts. It reads
	// kept counts, never the users themselves.
	countUsers func(role string, showDeleted bool) (query string, args []any)
	// nameSearchHint follows "FROM users" in a statement with a name search: what the dialect needs
	// to read the range of name keys rather than another index (see dialect.from).
	nameSearchHint string
	// selectiveRange, when set, is the format (one %s) that marks a bound of a filter's range on
	// an indexed column as one that holds for few rows, for a planner that has no statistics to
	// tell (see filter.go).
	selectiveRange string
	// suffixOf is the format of the last %[2]s characters of the text column %[1]s; contains, of
	// the condition that the text column %[1]s holds the text %[2]s.
	suffixOf, contains string
	// labelDrivesPages makes a page in id order of a label's value read the label's entries and
	// join their users (label_pages.go), for a planner that would otherwise list them all first.
	labelDrivesPages bool
	// insertRows is the most users one INSERT of a batch create carries. More rows a statement
	// means fewer statements to send and run (PostgreSQL pays a round trip for each), until the
	// statement's own costs take over.
	insertRows int
	// anonymousInsert makes a batch create's INSERT take "?" placeholders (insertManyStatement):
	// SQLite finds each numbered placeholder by a walk of a list of them, so that a long statement
	// of numbered ones costs the square of their number.
	anonymousInsert bool
	// idsIn is a subquery of the ids that $1, a JSON array of integers, holds: a batch's ids are
	// one argument, so that the statement's text is the same whatever their number, and each
	// backend keeps one plan of it.
	idsIn string
	// purgeLock, when set, is the query that takes the lock of PurgeExpired for the rest of the
	// transaction if it is free, given its key, and answers whether it took it: where processes
	// share the database, one purges at a time. SQLite has one writer anyway.
	purgeLock string
	// foldCounts, when set, must run about once a second while the store is open, to keep what
	// countUsers reads short (see counts.go).
	foldCounts func(ctx context.Context, db *sql.DB) error
	// bucketDeltas is the table of the deltas that the count buckets have not folded yet and the
	// start of a WHERE that keeps them, to which a condition is added with AND (count_ranges.go).
	bucketDeltas string
	// keptScope is the expression of the kept count of the scope that placeholder p holds, with
	// its pending deltas where the dialect has them (see countUsers).
	keptScope func(p string) string
	// addScopes adds to the kept counts the rows of $1, a JSON array of [scope, n]
	// (count_buckets.go).
	addScopes string
	// addBuckets adds to the count buckets the rows of $1, a JSON array of [kind, level, bucket,
	// n] (count_buckets.go).
	addBuckets string
}

// countScope names the count of the users with role, or of all users when role is empty, that are
// not deleted, as kept in the user_counts table of each backend.
func countScope(role string) string {
	if role == "" {
		return "all"
	}
	return "role:" + role
}

// deletedScope names the count of the deleted users that countScope(role) leaves out (migrations
// sqlite/0012 and postgres/0017).
func deletedScope(role string) string { return "deleted:" + countScope(role) }
