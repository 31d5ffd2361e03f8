// Users: reads, the paged and sorted list, and atomic writes.
package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"usersd/store"
)

const userColumns = `id, name, role, created_at, updated_at, version`

func scanUser(row scanner) (store.User, error) {
	var u store.User
	var created, updated int64
	if err := row.Scan(&u.ID, &u.Name, &u.Role, &created, &updated, &u.Version); err != nil {
		return store.User{}, err
	}
	u.CreatedAt, u.UpdatedAt = fromMicros(created), fromMicros(updated)
	return u, nil
}

// userResult reads the one user a statement returns; no row means there is no user with that id.
func userResult(row *sql.Row, id int32) (store.User, error) {
	u, err := scanUser(row)
	if errors.Is(err, sql.ErrNoRows) {
		return store.User{}, fmt.Errorf("user %d %w", id, store.ErrNotFound)
	}
	return u, err
}

// GetUser returns the user with the given id.
func (s *Store) GetUser(ctx context.Context, id int32) (_ store.User, err error) {
	defer s.classify(&err)
	row := s.reader.QueryRowContext(ctx, `SELECT `+userColumns+` FROM users WHERE id = $1`, id)
	return userResult(row, id)
}

// sortColumns maps each sortable attribute to its column.
var sortColumns = map[store.SortField]string{
	store.SortByID:        "id",
	store.SortByName:      "name",
	store.SortByRole:      "role",
	store.SortByCreatedAt: "created_at",
}

// orderBy builds the ORDER BY clause of q from the fixed column names above, never from client text,
// and ends it with id so that ties always break by id ascending.
func orderBy(keys []store.SortKey) (string, error) {
	var terms []string
	for _, k := range keys {
		column, ok := sortColumns[k.Field]
		if !ok {
			return "", fmt.Errorf("cannot sort by %q", k.Field)
		}
		if k.Descending {
			column += " DESC"
		}
		terms = append(terms, column)
		if k.Field == store.SortByID {
			return strings.Join(terms, ", "), nil // id is unique: nothing after it can matter
		}
	}
	return strings.Join(append(terms, "id"), ", "), nil
}

// ListUsers returns one page of the users that q selects and how many it selects in all, both read
// from one snapshot.
func (s *Store) ListUsers(ctx context.Context, q store.UserQuery) (_ store.Page[store.User], err error) {
	defer s.classify(&err)
	order, err := orderBy(q.Sort)
	if err != nil {
		return store.Page[store.User]{}, err
	}
	where, args := "", []any{}
	if q.Role != "" {
		where, args = ` WHERE role = $1`, append(args, q.Role)
	}
	countQuery, countArgs := s.dialect.countUsers(q.Role)
	limit, offset := placeholder(len(args)+1), placeholder(len(args)+2)
	var page store.Page[store.User]
	err = s.inReadTx(ctx, func(tx *sql.Tx) error {
		if err := tx.QueryRowContext(ctx, countQuery, countArgs...).Scan(&page.Total); err != nil {
			return fmt.Errorf("count users: %w", err)
		}
		rows, err := tx.QueryContext(ctx, `SELECT `+userColumns+` FROM users`+where+` ORDER BY `+order+` LIMIT `+limit+` OFFSET `+offset,
			append(args, q.Limit, q.Offset)...)
		page.Items, err = rowsOf(rows, err, scanUser)
		if err != nil {
			return fmt.Errorf("list users: %w", err)
		}
		return nil
	})
	return page, err
}

// CreateUser stores a new user with version 1 and completes done, if any, in the same transaction.
func (s *Store) CreateUser(ctx context.Context, nu store.NewUser, done *store.Completion[store.User]) (_ store.User, err error) {
	defer s.classify(&err)
	var u store.User
	err = s.inWriteTx(ctx, func(tx *sql.Tx) error {
		now := micros(s.now())
		row := tx.QueryRowContext(ctx,
			`INSERT INTO users (name, role, created_at, updated_at, version) VALUES ($1, $2, $3, $3, 1) RETURNING `+userColumns,
			nu.Name, nu.Role, now)
		var err error
		if u, err = scanUser(row); err != nil {
			return fmt.Errorf("insert user: %w", err)
		}
		return complete(ctx, tx, done, u)
	})
	return u, err
}

// UpdateUser sets the fields that changes names in one statement, so that two concurrent updates of
// different fields both take effect, and so that the version check and the write are one step.
func (s *Store) UpdateUser(ctx context.Context, id int32, changes store.UserChanges, ifVersion store.IfVersion) (_ store.User, err error) {
	defer s.classify(&err)
	condition, conditionArgs := versionCondition(ifVersion, 5)
	row := s.writer.QueryRowContext(ctx,
		`UPDATE users SET name = COALESCE($1, name), role = COALESCE($2, role), updated_at = $3, version = version + 1
		 WHERE id = $4`+condition+` RETURNING `+userColumns,
		append([]any{changes.Name, changes.Role, micros(s.now()), id}, conditionArgs...)...)
	u, err := scanUser(row)
	if errors.Is(err, sql.ErrNoRows) {
		return store.User{}, s.whyNotWritten(ctx, id, ifVersion)
	}
	if err != nil {
		return store.User{}, fmt.Errorf("update user %d: %w", id, err)
	}
	return u, nil
}

// DeleteUser deletes the user; the schema's ON DELETE CASCADE deletes the user's posts with it.
func (s *Store) DeleteUser(ctx context.Context, id int32, ifVersion store.IfVersion) (err error) {
	defer s.classify(&err)
	condition, conditionArgs := versionCondition(ifVersion, 2)
	res, err := s.writer.ExecContext(ctx, `DELETE FROM users WHERE id = $1`+condition, append([]any{id}, conditionArgs...)...)
	if err != nil {
		return fmt.Errorf("delete user %d: %w", id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("delete user %d: %w", id, err)
	}
	if n == 0 {
		return s.whyNotWritten(ctx, id, ifVersion)
	}
	return nil
}

// versionCondition is the WHERE clause that checks ifVersion in the write itself (compare and swap),
// with placeholders numbered from first, and its arguments; empty when there is no precondition.
func versionCondition(ifVersion store.IfVersion, first int) (string, []any) {
	switch {
	case ifVersion == nil:
		return "", nil
	case len(ifVersion) == 0:
		return " AND FALSE", nil
	}
	args := make([]any, len(ifVersion))
	placeholders := make([]string, len(ifVersion))
	for i, v := range ifVersion {
		args[i], placeholders[i] = v, placeholder(first+i)
	}
	return " AND version IN (" + strings.Join(placeholders, ", ") + ")", args
}

// whyNotWritten tells why a conditional write of user id changed no row: the user is missing, or it
// failed the precondition. The write itself has already decided; this only names the reason.
func (s *Store) whyNotWritten(ctx context.Context, id int32, ifVersion store.IfVersion) error {
	if ifVersion == nil {
		return fmt.Errorf("user %d %w", id, store.ErrNotFound)
	}
	var exists bool
	if err := s.writer.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM users WHERE id = $1)`, id).Scan(&exists); err != nil {
		return fmt.Errorf("find user %d: %w", id, err)
	}
	if !exists {
		return fmt.Errorf("user %d %w", id, store.ErrNotFound)
	}
	return fmt.Errorf("user %d: %w", id, store.ErrVersionMismatch)
}
