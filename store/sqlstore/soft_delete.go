// Soft delete (AIP-164): a deleted user keeps its row, marked with when it was deleted and when it
// goes for good, until an undelete restores it or a purge removes it. The change log's triggers
// (migrations sqlite/0012, postgres/0017) tell the kinds apart by the row's delete_time alone, so
// every write here is one statement on the row plus, for a purge, its DELETE.
package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"usersd/store"
)

// deleted is the condition of a user that is deleted and not yet purged: the only users that
// UndeleteUser finds.
const deleted = ` AND delete_time IS NOT NULL`

// SoftDeleteUser marks the user deleted now, to be purged at purgeAt. It bumps the version and
// updated_at as an update does, so that a precondition on the version sees it and the change log
// records it (as a delete that keeps the name).
func (s *Store) SoftDeleteUser(ctx context.Context, id int32, ifVersion store.IfVersion, purgeAt time.Time) (_ store.User, err error) {
	if purgeAt.IsZero() {
		return store.User{}, fmt.Errorf("soft delete of user %d: no purge time", id)
	}
	defer s.announceChange(&err)
	condition, conditionArgs := versionCondition(ifVersion, 6)
	actor := store.ActorOf(ctx)
	args := append([]any{id, nil, micros(purgeAt), actor.Name, int64(actor.Type)}, conditionArgs...)
	var u store.User
	err = s.write(ctx, 0, func(ctx context.Context, tx writeTx) error {
		tx = tx.keepingIf(len(conditionArgs) <= 1)
		args[1] = micros(s.now())
		row := tx.QueryRowContext(ctx,
			`UPDATE users SET delete_time = $2, purge_time = $3, updated_at = $2, version = version + 1,
			 changed_by = $4, changed_by_type = $5
			 WHERE id = $1`+live+condition+` RETURNING `+userColumns, args...)
		var err error
		u, err = scanUser(row)
		if errors.Is(err, sql.ErrNoRows) {
			return whyNotWritten(ctx, tx, id, ifVersion, live)
		}
		if err != nil {
			return fmt.Errorf("soft delete user %d: %w", id, err)
		}
		return nil
	})
	return u, err
}

// UndeleteUser restores a deleted user: both times cleared, the version bumped. It never clashes
// on a unique field, since a deleted user keeps holding its values.
func (s *Store) UndeleteUser(ctx context.Context, id int32, ifVersion store.IfVersion) (_ store.User, err error) {
	defer s.announceChange(&err)
	condition, conditionArgs := versionCondition(ifVersion, 5)
	actor := store.ActorOf(ctx)
	args := append([]any{id, nil, actor.Name, int64(actor.Type)}, conditionArgs...)
	var u store.User
	err = s.write(ctx, 0, func(ctx context.Context, tx writeTx) error {
		tx = tx.keepingIf(len(conditionArgs) <= 1)
		args[1] = micros(s.now())
		row := tx.QueryRowContext(ctx,
			`UPDATE users SET delete_time = NULL, purge_time = NULL, updated_at = $2, version = version + 1,
			 changed_by = $3, changed_by_type = $4
			 WHERE id = $1`+deleted+condition+` RETURNING `+userColumns, args...)
		var err error
		u, err = scanUser(row)
		if errors.Is(err, sql.ErrNoRows) {
			return whyNotWritten(ctx, tx, id, ifVersion, deleted)
		}
		if err != nil {
			return fmt.Errorf("undelete user %d: %w", id, err)
		}
		return nil
	})
	return u, err
}

// markPurge is the first statement of a purge: it names who purges, for the change log's trigger to
// record, and gives a live user its times, so that the DELETE after it is logged as a purge. It
// leaves the version alone, so the change log records no change of its own: the purge of a live
// user is one purge and nothing else, as that of a deleted user is. $1 is the user, $2 and $3 the
// actor, $4 now.
const markPurge = `UPDATE users SET changed_by = $2, changed_by_type = $3,
	delete_time = COALESCE(delete_time, $4), purge_time = COALESCE(purge_time, $4) WHERE id = $1`

// PurgeUser removes the user, deleted or not, and (by the schema's ON DELETE CASCADE) its posts.
// The change log's trigger takes its name and identity out of every change of it.
func (s *Store) PurgeUser(ctx context.Context, id int32, ifVersion store.IfVersion) (err error) {
	defer s.announceChange(&err)
	condition, conditionArgs := versionCondition(ifVersion, 5)
	actor := store.ActorOf(ctx)
	args := append([]any{id, actor.Name, int64(actor.Type), nil}, conditionArgs...)
	return s.write(ctx, 0, func(ctx context.Context, tx writeTx) error {
		tx = tx.keepingIf(len(conditionArgs) <= 1)
		args[3] = micros(s.now())
		res, err := tx.ExecContext(ctx, markPurge+condition, args...)
		if err != nil {
			return fmt.Errorf("purge user %d: %w", id, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("purge user %d: %w", id, err)
		} else if n == 0 {
			return whyNotWritten(ctx, tx, id, ifVersion, "")
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM users WHERE id = $1`, id); err != nil {
			return fmt.Errorf("purge user %d: %w", id, err)
		}
		return nil
	})
}

// purgeLockKey names the advisory lock that lets one process at a time purge expired users on
// PostgreSQL ("purge" in ASCII). It is a transaction's lock, taken with a try: a purge that finds it
// held returns at once, since the holder purges for everyone, and nothing of it outlives the
// transaction, so it works through a pooler in transaction mode.
const purgeLockKey = 0x7075726765

// dueUsersQuery reads the ids of up to $2 deleted users due for purging at $1, oldest due first,
// from the partial index on purge_time (migrations sqlite/0012, postgres/0018); kept here for the
// plan tests.
const dueUsersQuery = `SELECT id FROM users WHERE purge_time IS NOT NULL AND purge_time <= $1 ORDER BY purge_time LIMIT $2`

// PurgeExpired purges up to limit deleted users whose purge time is at or before now, each as
// PurgeUser does, in one transaction. The purge is the system's, not the deleter's: the change log
// names the actor of ctx (none, for a sweeper), not who deleted the user.
func (s *Store) PurgeExpired(ctx context.Context, now time.Time, limit int) (_ int, err error) {
	if err := s.refuseWrite(); err != nil {
		return 0, err
	}
	defer s.classifyWrite(ctx, &err)
	actor := store.ActorOf(ctx)
	purged := 0
	// Not batched, like the other sweeps: a purge of up to limit users must not hold up requests'
	// writes in their batch.
	err = inTx(ctx, s.writer, nil, func(tx *sql.Tx) error {
		if s.dialect.purgeLock != "" {
			var ours bool
			if err := tx.QueryRowContext(ctx, s.dialect.purgeLock, int64(purgeLockKey)).Scan(&ours); err != nil {
				return fmt.Errorf("take the purge lock: %w", err)
			}
			if !ours {
				return nil // another process is purging: its purge serves everyone
			}
		}
		// Locked until the transaction ends (PostgreSQL), so that an undelete waits for the purge and
		// then finds the user gone, rather than the purge removing a user just restored.
		rows, err := tx.QueryContext(ctx, dueUsersQuery+s.dialect.forUpdate, micros(now), limit)
		due, err := rowsOf(rows, err, func(row scanner) (id int32, err error) { return id, row.Scan(&id) })
		if err != nil {
			return fmt.Errorf("find users due for purging: %w", err)
		}
		mark := markPurge + ` AND purge_time <= $4`
		for _, id := range due {
			if _, err := tx.ExecContext(ctx, mark, id, actor.Name, int64(actor.Type), micros(now)); err != nil {
				return fmt.Errorf("purge user %d: %w", id, err)
			}
			res, err := tx.ExecContext(ctx, `DELETE FROM users WHERE id = $1 AND purge_time <= $2`, id, micros(now))
			if err != nil {
				return fmt.Errorf("purge user %d: %w", id, err)
			}
			n, err := res.RowsAffected()
			if err != nil {
				return fmt.Errorf("purge user %d: %w", id, err)
			}
			purged += int(n)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("purge expired users: %w", err)
	}
	if purged > 0 {
		s.notices.send()
	}
	return purged, nil
}
