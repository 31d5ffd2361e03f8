// Users: reads, the paged and sorted list (built in list.go), and atomic writes.
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

// userColumns are the columns read back. name_key, the search key, is written with every name
// (store.NameKey) and only ever searched; user_name_key and email_key likewise, and only ever
// held unique. delete_time and purge_time are NULL unless the user is deleted.
const userColumns = `id, name, role, created_at, updated_at, version,
	user_name, given_name, family_name, email, external_id, active, labels, delete_time, purge_time`

// live is the condition of a user that is not deleted: every read and write of a user that does not
// ask for deleted users holds it, so that a deleted user is missing to them.
const live = ` AND delete_time IS NULL`

func scanUser(row scanner) (store.User, error) {
	var u store.User
	var created, updated int64
	var labels string
	var active bool
	var deleted, purge sql.NullInt64
	if err := row.Scan(&u.ID, &u.Name, &u.Role, &created, &updated, &u.Version,
		&u.UserName, &u.GivenName, &u.FamilyName, &u.Email, &u.ExternalID, &active, &labels, &deleted, &purge); err != nil {
		return store.User{}, err
	}
	u.Inactive = !active
	u.CreatedAt, u.UpdatedAt = fromMicros(created), fromMicros(updated)
	u.DeleteTime, u.PurgeTime = optionalMicros(deleted), optionalMicros(purge)
	var err error
	if u.Labels, err = decodeLabels(labels); err != nil {
		return store.User{}, fmt.Errorf("user %d: %w", u.ID, err)
	}
	return u, nil
}

// optionalMicros is the time of a nullable column: zero for NULL.
func optionalMicros(us sql.NullInt64) time.Time {
	if !us.Valid {
		return time.Time{}
	}
	return fromMicros(us.Int64)
}

// userResult reads the one user a statement returns; no row means there is no user with that id.
func userResult(row *sql.Row, id int32) (store.User, error) {
	u, err := scanUser(row)
	if errors.Is(err, sql.ErrNoRows) {
		return store.User{}, store.UserNotFound{ID: id}
	}
	return u, err
}

// GetUser returns the user with the given id, unless it is deleted.
func (s *Store) GetUser(ctx context.Context, id int32) (_ store.User, err error) {
	return s.getUser(ctx, id, live)
}

// GetUserShowingDeleted returns the user with the given id, deleted or not.
func (s *Store) GetUserShowingDeleted(ctx context.Context, id int32) (_ store.User, err error) {
	return s.getUser(ctx, id, "")
}

// getUser reads the user with the given id that also meets condition (live, or "" for any).
func (s *Store) getUser(ctx context.Context, id int32, condition string) (_ store.User, err error) {
	defer s.classify(ctx, &err)
	var u store.User
	err = s.onReader(ctx, func(db *sql.DB) (err error) {
		u, err = userResult(db.QueryRowContext(ctx, `SELECT `+userColumns+` FROM users WHERE id = $1`+condition, id), id)
		return err
	})
	return u, err
}

// ListUsers returns one page of the users that q selects and how many it selects in all, both read
// from one snapshot.
func (s *Store) ListUsers(ctx context.Context, q store.UserQuery) (_ store.Page[store.User], err error) {
	defer s.classify(ctx, &err)
	reads, err := s.dialect.pageReads(q)
	if err != nil {
		return store.Page[store.User]{}, err
	}
	count, err := s.dialect.countStatement(q)
	if err != nil {
		return store.Page[store.User]{}, err
	}
	kept, hasKept := s.dialect.keptCount(q)
	var page store.Page[store.User]
	err = s.inReadTx(ctx, func(tx *sql.Tx) error {
		page.Items = page.Items[:0] // what a standby read before it failed is read again
		var total sql.NullInt64
		if hasKept {
			if err := tx.QueryRowContext(ctx, kept.query, kept.args...).Scan(&total); err != nil {
				return fmt.Errorf("read the kept count of users: %w", err)
			}
		}
		if !total.Valid {
			if err := tx.QueryRowContext(ctx, count.query, count.args...).Scan(&total); err != nil {
				return fmt.Errorf("count users: %w", err)
			}
		}
		page.Total = total.Int64
		// One row more than the page tells whether another page follows.
		for _, read := range reads {
			want := q.Limit + 1 - len(page.Items)
			if want == 0 {
				break
			}
			st := read.limited(want)
			rows, err := tx.QueryContext(ctx, st.query, st.args...)
			users, err := rowsOf(rows, err, scanUser)
			if err != nil {
				return fmt.Errorf("list users: %w", err)
			}
			page.Items = append(page.Items, users...)
		}
		return nil
	})
	if len(page.Items) > q.Limit {
		page.Items, page.More = page.Items[:q.Limit], true
	}
	return page, err
}

// CreateUser stores a new user with version 1 and completes done, if any, in the same transaction.
func (s *Store) CreateUser(ctx context.Context, nu store.NewUser, done *store.Completion[store.User]) (_ store.User, err error) {
	defer s.announceChange(&err)
	var u store.User
	actor := store.ActorOf(ctx)
	labels := encodeLabels(nu.Labels)
	size := len(nu.Name) + len(nu.Role) + identitySize(nu.Identity) + len(labels)
	err = s.write(ctx, size, func(ctx context.Context, tx writeTx) error {
		var err error
		if u, err = s.insertUser(ctx, tx, nu, labels, micros(s.now()), actor); err != nil {
			return err
		}
		return complete(ctx, tx, done, u)
	})
	return u, err
}

// insertUser inserts one new user, created at now by actor, with its labels already encoded.
func (s *Store) insertUser(ctx context.Context, tx writeTx, nu store.NewUser, labels string, now int64, actor store.Actor) (store.User, error) {
	row := tx.QueryRowContext(ctx,
		`INSERT INTO users (name, name_key, role, created_at, updated_at, version, changed_by, changed_by_type,
		 user_name, user_name_key, given_name, family_name, email, email_key, external_id, active, labels)
		 VALUES ($1, $2, $3, $4, $4, 1, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15) RETURNING `+userColumns,
		nu.Name, store.NameKey(nu.Name), nu.Role, now, actor.Name, int64(actor.Type),
		nu.UserName, store.NameKey(nu.UserName), nu.GivenName, nu.FamilyName, nu.Email, store.NameKey(nu.Email),
		nu.ExternalID, !nu.Inactive, labels)
	u, err := scanUser(row)
	if err != nil {
		return store.User{}, s.uniqueOr(fmt.Errorf("insert user: %w", err))
	}
	return u, nil
}

// UpdateUser sets the fields that changes names in one statement, so that two concurrent updates of
// different fields both take effect, and so that the version check and the write are one step.
func (s *Store) UpdateUser(ctx context.Context, id int32, changes store.UserChanges, ifVersion store.IfVersion) (_ store.User, err error) {
	defer s.announceChange(&err)
	var nameKey *string
	size := 0
	if changes.Name != nil {
		key := store.NameKey(*changes.Name)
		nameKey, size = &key, len(*changes.Name)
	}
	if changes.Role != nil {
		size += len(*changes.Role)
	}
	identity := identityChanges(changes)
	size += identity.size
	condition, conditionArgs := versionCondition(ifVersion, 17)
	actor := store.ActorOf(ctx)
	args := append([]any{changes.Name, nameKey, changes.Role, nil, id, actor.Name, int64(actor.Type),
		identity.userName, identity.userNameKey, identity.givenName, identity.familyName,
		identity.email, identity.emailKey, identity.externalID, identity.active, nil}, conditionArgs...)
	var u store.User
	err = s.write(ctx, size, func(ctx context.Context, tx writeTx) error {
		tx = tx.keepingIf(len(conditionArgs) <= 1)
		args[3] = micros(s.now())
		labels, err := s.labelsAfter(ctx, tx, id, changes)
		if err != nil {
			return err
		}
		args[15] = labels
		row := tx.QueryRowContext(ctx,
			`UPDATE users SET name = COALESCE($1, name), name_key = COALESCE($2, name_key), role = COALESCE($3, role),
			 updated_at = $4, version = version + 1, changed_by = $6, changed_by_type = $7,
			 user_name = COALESCE($8, user_name), user_name_key = COALESCE($9, user_name_key),
			 given_name = COALESCE($10, given_name), family_name = COALESCE($11, family_name),
			 email = COALESCE($12, email), email_key = COALESCE($13, email_key),
			 external_id = COALESCE($14, external_id), active = COALESCE($15, active), labels = COALESCE($16, labels)
			 WHERE id = $5`+live+condition+` RETURNING `+userColumns, args...)
		u, err = scanUser(row)
		if errors.Is(err, sql.ErrNoRows) {
			return whyNotWritten(ctx, tx, id, ifVersion, live)
		}
		if err != nil {
			return s.uniqueOr(fmt.Errorf("update user %d: %w", id, err))
		}
		return nil
	})
	return u, err
}

// DeleteUser deletes the user; the schema's ON DELETE CASCADE deletes the user's posts with it.
// The user's row is first marked with who deletes it, in the same transaction, for the change
// log's trigger to record; the mark leaves the version alone, so it is no change of its own. A
// deleted user is not found: PurgeUser is what removes one.
func (s *Store) DeleteUser(ctx context.Context, id int32, ifVersion store.IfVersion) (err error) {
	defer s.announceChange(&err)
	condition, conditionArgs := versionCondition(ifVersion, 4)
	actor := store.ActorOf(ctx)
	args := append([]any{id, actor.Name, int64(actor.Type)}, conditionArgs...)
	return s.write(ctx, 0, func(ctx context.Context, tx writeTx) error {
		tx = tx.keepingIf(len(conditionArgs) <= 1)
		res, err := tx.ExecContext(ctx, `UPDATE users SET changed_by = $2, changed_by_type = $3 WHERE id = $1`+live+condition, args...)
		if err != nil {
			return fmt.Errorf("delete user %d: %w", id, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("delete user %d: %w", id, err)
		} else if n == 0 {
			return whyNotWritten(ctx, tx, id, ifVersion, live)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM users WHERE id = $1`, id); err != nil {
			return fmt.Errorf("delete user %d: %w", id, err)
		}
		return nil
	})
}

// announceChange wakes the readers of the change log after a write of a user has committed; a
// write into a lost SQLite file, which fails, wakes no one.
func (s *Store) announceChange(err *error) {
	if *err == nil {
		s.notices.send()
	}
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

// whyNotWritten tells why a conditional write of user id changed no row: the user is missing (or,
// by state, in the wrong state: deleted for a write of a live user, live for an undelete), or it
// failed the precondition. state is the write's own condition on the user's state (live, deleted,
// or "" for any). The write itself has already decided; this only names the reason, read in the
// write's own transaction.
func whyNotWritten(ctx context.Context, tx writeTx, id int32, ifVersion store.IfVersion, state string) error {
	if ifVersion == nil {
		return store.UserNotFound{ID: id}
	}
	var exists bool
	if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM users WHERE id = $1`+state+`)`, id).Scan(&exists); err != nil {
		return fmt.Errorf("find user %d: %w", id, err)
	}
	if !exists {
		return store.UserNotFound{ID: id}
	}
	return fmt.Errorf("user %d: %w", id, store.ErrVersionMismatch)
}
