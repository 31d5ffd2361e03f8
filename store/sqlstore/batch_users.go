// Batches of users (AIP-231, 233, 235): each is all or nothing, in a transaction of its own
// (writeAlone) rather than a share of a group commit, since a batch already is many writes and
// must commit or fail as one. The change log's triggers record one change per row, in the order
// the rows are written, which is the batch's.
package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"time"

	"usersd/store"
)

// idsArgument is ids as the one argument of dialect.idsIn.
func idsArgument(ids []int32) string {
	encoded, _ := json.Marshal(ids) // a slice of integers always encodes
	return string(encoded)
}

// BatchGetUsers reads the live users with ids in one statement, and answers them in the order of
// ids, each as often as it is asked for.
func (s *Store) BatchGetUsers(ctx context.Context, ids []int32) (_ []store.User, err error) {
	defer s.classify(ctx, &err)
	found := make(map[int32]store.User, len(ids))
	err = s.onReader(ctx, func(db *sql.DB) error {
		clear(found) // what a standby read before it failed is read again
		rows, err := db.QueryContext(ctx, `SELECT `+userColumns+` FROM users WHERE id IN (`+s.dialect.idsIn+`)`+live, idsArgument(ids))
		users, err := rowsOf(rows, err, scanUser)
		if err != nil {
			return fmt.Errorf("read a batch of users: %w", err)
		}
		for _, u := range users {
			found[u.ID] = u
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]store.User, len(ids))
	for i, id := range ids {
		u, ok := found[id]
		if !ok {
			return nil, store.UserNotFound{ID: id}
		}
		out[i] = u
	}
	return out, nil
}

// CreateUsers inserts the users a statement of many rows at a time. When one of them clashes on a
// unique value, the whole transaction is undone and a second one inserts the users one by one, to
// name the first that clashes (the slow way is only taken by a batch that fails), and the whole
// batch fails; if by then none clashes (the user it met was deleted meanwhile), it goes in.
//
// The first transaction holds no savepoint: it is the batch's alone, so undoing it undoes just the
// batch, and a savepoint would make SQLite copy every page the batch changes into its sub-journal
// and free the copies at the end, about a third of a batch's work (docs/PERFORMANCE.md, "Batch
// create").
func (s *Store) CreateUsers(ctx context.Context, users []store.NewUser, done *store.Completion[[]store.User]) (_ []store.User, err error) {
	if len(users) == 0 {
		return nil, errors.New("create users: the batch is empty")
	}
	defer s.announceChange(&err)
	actor := store.ActorOf(ctx)
	labels := make([]string, len(users))
	size := 0
	for i, nu := range users {
		labels[i] = encodeLabels(nu.Labels)
		size += len(nu.Name) + len(nu.Role) + identitySize(nu.Identity) + len(labels[i])
	}
	var created []store.User
	insert := func(insertIn func(context.Context, writeTx, []store.NewUser, []string, int64, store.Actor) ([]store.User, error)) error {
		return s.writeAlone(ctx, size, func(ctx context.Context, tx writeTx) error {
			now := micros(s.now())
			var err error
			if created, err = insertIn(ctx, tx, users, labels, now, actor); err != nil {
				return err
			}
			return complete(ctx, tx, done, created)
		})
	}
	err = insert(s.insertUsers)
	var clash batchClash
	if errors.As(err, &clash) {
		err = insert(s.insertUsersOneByOne)
	}
	if err != nil {
		return nil, err
	}
	return created, nil
}

// batchClash is the error of a batch insert that met a unique value: the statements cannot say
// which user it was.
type batchClash struct{ err error }

func (c batchClash) Error() string { return "insert users: " + c.err.Error() }
func (c batchClash) Unwrap() error { return c.err }

// insertUsers inserts users in order and returns them in that order, or a batchClash when one of
// them clashes on a unique value. The statements return the ids alone: every other column is what
// the batch wrote, and reading it back would cost as much again.
func (s *Store) insertUsers(ctx context.Context, tx writeTx, users []store.NewUser, labels []string, now int64, actor store.Actor) ([]store.User, error) {
	rowsPer := s.dialect.insertRows
	created := make([]store.User, 0, len(users))
	var full *sql.Stmt // the statement of a whole chunk, prepared once for every chunk
	defer func() {
		if full != nil {
			full.Close()
		}
	}()
	for first, last := 0, 0; first < len(users); first = last {
		last = first + chunkRows(len(users)-first, rowsPer)
		query, args := insertManyStatement(users[first:last], labels[first:last], now, actor, s.dialect.anonymousInsert)
		var rows *sql.Rows
		var err error
		switch {
		case last-first < rowsPer || len(users) < 2*rowsPer:
			rows, err = tx.QueryContext(ctx, query, args...)
		case full == nil:
			if full, err = tx.PrepareContext(ctx, query); err != nil {
				return nil, fmt.Errorf("insert users: %w", err)
			}
			fallthrough
		default:
			rows, err = full.QueryContext(ctx, args...)
		}
		ids, err := rowsOf(rows, err, func(row scanner) (id int32, err error) { return id, row.Scan(&id) })
		if err != nil {
			if s.dialect.uniqueField(err) != "" {
				return nil, batchClash{err}
			}
			return nil, fmt.Errorf("insert users: %w", err)
		}
		if len(ids) != last-first {
			return nil, fmt.Errorf("insert users: %d rows inserted of %d", len(ids), last-first)
		}
		// Ids are drawn in the order of the rows, whatever order RETURNING reads them back in.
		slices.Sort(ids)
		for i, id := range ids {
			created = append(created, insertedUser(id, users[first+i], now))
		}
	}
	return created, nil
}

// insertUsersOneByOne inserts users in order, one statement each, and fails with the ItemError of
// the first that fails. It follows a batch insert that clashed: if none clashes now, the user the
// batch met is gone since, and the batch goes in.
func (s *Store) insertUsersOneByOne(ctx context.Context, tx writeTx, users []store.NewUser, labels []string, now int64, actor store.Actor) ([]store.User, error) {
	created := make([]store.User, 0, len(users))
	for i, nu := range users {
		u, err := s.insertUser(ctx, tx, nu, labels[i], now, actor)
		if err != nil {
			return nil, store.ItemError{Index: i, Err: err}
		}
		created = append(created, u)
	}
	return created, nil
}

// chunkRows is how many of the remaining users of a batch the next INSERT carries: rowsPer while
// that many are left, then the largest power of two left, so that batches of every size use a
// few statement texts, which the caches of prepared statements (the driver's, the server's) keep,
// rather than one text per size, which would crowd the store's other statements out of them.
func chunkRows(remaining, rowsPer int) int {
	if remaining >= rowsPer {
		return rowsPer
	}
	return 1 << (bits.Len(uint(remaining)) - 1)
}

// insertedUser is the user that insertManyStatement wrote from nu, with id, at now: as scanUser
// would read it back.
func insertedUser(id int32, nu store.NewUser, now int64) store.User {
	at := fromMicros(now)
	u := store.User{ID: id, Name: nu.Name, Role: nu.Role, CreatedAt: at, UpdatedAt: at, Version: 1, Identity: nu.Identity}
	u.Labels = nil // as stored: a copy, and none rather than an empty map
	if len(nu.Labels) > 0 {
		u.Labels = maps.Clone(nu.Labels)
	}
	return u
}

// insertColumnsPerUser is how many of a row's values insertManyStatement takes from each user; the
// time and the actor are the statement's first three arguments, shared by every row.
const insertColumnsPerUser = 12

// insertManyStatement is the INSERT of users, one row each, with its arguments. With anonymous,
// every placeholder is a "?" and the shared values are repeated in each row: SQLite's driver asks
// for the name of each placeholder before it binds it, and SQLite finds a numbered one's name by
// walking the statement's list of them, so that numbered placeholders cost the square of their
// number.
func insertManyStatement(users []store.NewUser, labels []string, now int64, actor store.Actor, anonymous bool) (string, []any) {
	var b strings.Builder
	b.WriteString(`INSERT INTO users (name, name_key, role, created_at, updated_at, version, changed_by, changed_by_type,
		user_name, user_name_key, given_name, family_name, email, email_key, external_id, active, labels) VALUES `)
	var args []any
	if anonymous {
		args = make([]any, 0, (insertColumnsPerUser+4)*len(users))
	} else {
		args = make([]any, 0, 3+insertColumnsPerUser*len(users))
		args = append(args, now, actor.Name, int64(actor.Type))
	}
	for i, nu := range users {
		if i > 0 {
			b.WriteString(", ")
		}
		if anonymous {
			b.WriteString("(?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
			args = append(args, nu.Name, store.NameKey(nu.Name), nu.Role, now, now, actor.Name, int64(actor.Type))
		} else {
			n := len(args) + 1
			p := func(k int) string { return "$" + strconv.Itoa(n+k) }
			fmt.Fprintf(&b, "(%s, %s, %s, $1, $1, 1, $2, $3, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
				p(0), p(1), p(2), p(3), p(4), p(5), p(6), p(7), p(8), p(9), p(10), p(11))
			args = append(args, nu.Name, store.NameKey(nu.Name), nu.Role)
		}
		args = append(args, nu.UserName, store.NameKey(nu.UserName), nu.GivenName, nu.FamilyName, nu.Email, store.NameKey(nu.Email),
			nu.ExternalID, !nu.Inactive, labels[i])
	}
	b.WriteString(` RETURNING id`)
	return b.String(), args
}

// SoftDeleteUsers marks each user deleted, in the order of ids, with the statement of
// SoftDeleteUser, so that the change log records the deletes in that order.
func (s *Store) SoftDeleteUsers(ctx context.Context, ids []int32, purgeAt time.Time) (_ []store.User, err error) {
	if purgeAt.IsZero() {
		return nil, errors.New("soft delete of users: no purge time")
	}
	defer s.announceChange(&err)
	actor := store.ActorOf(ctx)
	var deletedUsers []store.User
	err = s.writeAlone(ctx, 0, func(ctx context.Context, tx writeTx) error {
		now := micros(s.now())
		deletedUsers = make([]store.User, 0, len(ids))
		for i, id := range ids {
			row := tx.QueryRowContext(ctx,
				`UPDATE users SET delete_time = $2, purge_time = $3, updated_at = $2, version = version + 1,
				 changed_by = $4, changed_by_type = $5
				 WHERE id = $1`+live+` RETURNING `+userColumns, id, now, micros(purgeAt), actor.Name, int64(actor.Type))
			u, err := userResult(row, id)
			if err != nil {
				return batchItemError(i, id, err)
			}
			deletedUsers = append(deletedUsers, u)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return deletedUsers, nil
}

// DeleteUsers removes each user and its posts, in the order of ids, with the statements of
// DeleteUser.
func (s *Store) DeleteUsers(ctx context.Context, ids []int32) (err error) {
	defer s.announceChange(&err)
	actor := store.ActorOf(ctx)
	return s.writeAlone(ctx, 0, func(ctx context.Context, tx writeTx) error {
		for i, id := range ids {
			res, err := tx.ExecContext(ctx, `UPDATE users SET changed_by = $2, changed_by_type = $3 WHERE id = $1`+live,
				id, actor.Name, int64(actor.Type))
			if ok, err := oneRowChanged(res, err); err != nil {
				return fmt.Errorf("delete user %d: %w", id, err)
			} else if !ok {
				return store.ItemError{Index: i, Err: store.UserNotFound{ID: id}}
			}
			if _, err := tx.ExecContext(ctx, `DELETE FROM users WHERE id = $1`, id); err != nil {
				return fmt.Errorf("delete user %d: %w", id, err)
			}
		}
		return nil
	})
}

// batchItemError is the error of the i-th item of a batch, user id: a missing user names its
// index; any other error is the batch's own.
func batchItemError(i int, id int32, err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return store.ItemError{Index: i, Err: err}
	}
	return fmt.Errorf("user %d: %w", id, err)
}
