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
func (s *Store) GetUser(ctx context.Context, id int32) (store.User, error) {
	row := s.reader.QueryRowContext(ctx, `SELECT `+userColumns+` FROM users WHERE id = ?`, id)
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
func (s *Store) ListUsers(ctx context.Context, q store.UserQuery) (store.Page[store.User], error) {
	order, err := orderBy(q.Sort)
	if err != nil {
		return store.Page[store.User]{}, err
	}
	where, args := "", []any{}
	if q.Role != "" {
		where, args = ` WHERE role = ?`, append(args, q.Role)
	}
	var page store.Page[store.User]
	err = s.inReadTx(ctx, func(tx *sql.Tx) error {
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM users`+where, args...).Scan(&page.Total); err != nil {
			return fmt.Errorf("count users: %w", err)
		}
		rows, err := tx.QueryContext(ctx, `SELECT `+userColumns+` FROM users`+where+` ORDER BY `+order+` LIMIT ? OFFSET ?`,
			append(args, q.Limit, q.Offset)...)
		page.Items, err = rowsOf(rows, err, scanUser)
		if err != nil {
			return fmt.Errorf("list users: %w", err)
		}
		return nil
	})
	return page, err
}

// CreateUser stores a new user with version 1.
func (s *Store) CreateUser(ctx context.Context, nu store.NewUser) (store.User, error) {
	now := micros(s.now())
	row := s.writer.QueryRowContext(ctx,
		`INSERT INTO users (name, role, created_at, updated_at, version) VALUES (?, ?, ?, ?, 1) RETURNING `+userColumns,
		nu.Name, nu.Role, now, now)
	u, err := scanUser(row)
	if err != nil {
		return store.User{}, fmt.Errorf("insert user: %w", err)
	}
	return u, nil
}

// UpdateUser sets the fields that changes names in one statement, so that two concurrent updates of
// different fields both take effect.
func (s *Store) UpdateUser(ctx context.Context, id int32, changes store.UserChanges) (store.User, error) {
	row := s.writer.QueryRowContext(ctx,
		`UPDATE users SET name = COALESCE(?, name), role = COALESCE(?, role), updated_at = ?, version = version + 1
		 WHERE id = ? RETURNING `+userColumns,
		changes.Name, changes.Role, micros(s.now()), id)
	return userResult(row, id)
}

// DeleteUser deletes the user; the schema's ON DELETE CASCADE deletes the user's posts with it.
func (s *Store) DeleteUser(ctx context.Context, id int32) error {
	res, err := s.writer.ExecContext(ctx, `DELETE FROM users WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("delete user %d: %w", id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("delete user %d: %w", id, err)
	}
	if n == 0 {
		return fmt.Errorf("user %d %w", id, store.ErrNotFound)
	}
	return nil
}
