// The unique fields of a user: which one a write that broke a unique index clashed on.
package sqlstore

import (
	"errors"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"
)

// uniqueIndexes are the unique indexes of users' identity fields (migrations sqlite/0011 and
// postgres/0016), with the field each holds unique, as the proto names it, and the column that
// SQLite's error names.
var uniqueIndexes = []struct{ index, column, field string }{
	{"users_user_name_unique", "users.user_name_key", "user_name"},
	{"users_email_unique", "users.email_key", "email"},
	{"users_external_id_unique", "users.external_id", "external_id"},
}

// sqliteConstraintUnique is SQLite's extended result code of a unique index's violation.
const sqliteConstraintUnique = 2067

// sqliteUniqueField is the field whose unique index err broke on SQLite; "" if none. SQLite names
// the column, not the index, in its message alone.
func sqliteUniqueField(err error) string {
	var sqliteErr *sqlite.Error
	if !errors.As(err, &sqliteErr) || sqliteErr.Code() != sqliteConstraintUnique {
		return ""
	}
	for _, u := range uniqueIndexes {
		if strings.Contains(sqliteErr.Error(), u.column) {
			return u.field
		}
	}
	return ""
}

// postgresUniqueField is the field whose unique index err broke on PostgreSQL; "" if none.
func postgresUniqueField(err error) string {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "23505" {
		return ""
	}
	for _, u := range uniqueIndexes {
		if pgErr.ConstraintName == u.index {
			return u.field
		}
	}
	return ""
}
