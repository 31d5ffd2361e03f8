// Posts: a user's posts, listed by id, and created only for a user that exists; a deleted user's
// posts are hidden with it.
package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"usersd/store"
)

const postColumns = `id, user_id, title, body, created_at`

func scanPost(row scanner) (store.Post, error) {
	var p store.Post
	var created int64
	if err := row.Scan(&p.ID, &p.UserID, &p.Title, &p.Body, &created); err != nil {
		return store.Post{}, err
	}
	p.CreatedAt = fromMicros(created)
	return p, nil
}

// ListPosts returns one page of the user's posts by id ascending, and how many the user has.
func (s *Store) ListPosts(ctx context.Context, userID int32, q store.PostQuery) (_ store.Page[store.Post], err error) {
	defer s.classify(ctx, &err)
	var page store.Page[store.Post]
	err = s.inReadTx(ctx, func(tx *sql.Tx) error {
		var exists bool
		if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM users WHERE id = $1`+live+`)`, userID).Scan(&exists); err != nil {
			return fmt.Errorf("find user %d: %w", userID, err)
		}
		if !exists {
			return store.UserNotFound{ID: userID}
		}
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM posts WHERE user_id = $1`, userID).Scan(&page.Total); err != nil {
			return fmt.Errorf("count posts of user %d: %w", userID, err)
		}
		// After a cursor, a seek into (user_id, id); one row more than the page tells whether
		// another page follows.
		rows, err := tx.QueryContext(ctx, `SELECT `+postColumns+` FROM posts WHERE user_id = $1 AND id > $2 ORDER BY id LIMIT $3 OFFSET $4`,
			userID, q.AfterID, q.Limit+1, q.Offset)
		if page.Items, err = rowsOf(rows, err, scanPost); err != nil {
			return fmt.Errorf("list posts of user %d: %w", userID, err)
		}
		return nil
	})
	if len(page.Items) > q.Limit {
		page.Items, page.More = page.Items[:q.Limit], true
	}
	return page, err
}

// CreatePost inserts the post only if its user exists and is not deleted, checked in the same
// statement (and by the foreign key), so that a concurrent delete of the user cannot leave an
// orphan; done, if any, completes in the same transaction. A post that races a soft delete of its
// user may land, hidden with the user: it goes with the user's purge, or shows again with an
// undelete, as a post made just before the delete would.
func (s *Store) CreatePost(ctx context.Context, userID int32, np store.NewPost, done *store.Completion[store.Post]) (_ store.Post, err error) {
	var p store.Post
	err = s.write(ctx, len(np.Title)+len(np.Body), func(ctx context.Context, tx writeTx) error {
		row := tx.QueryRowContext(ctx,
			`INSERT INTO posts (user_id, title, body, created_at)
			 SELECT CAST($1 AS INTEGER), CAST($2 AS TEXT), CAST($3 AS TEXT), CAST($4 AS BIGINT)
			 WHERE EXISTS (SELECT 1 FROM users WHERE id = $1`+live+`)
			 RETURNING `+postColumns,
			userID, np.Title, np.Body, micros(s.now()))
		var err error
		p, err = scanPost(row)
		// No row: the user did not exist. A foreign key violation: it existed when the statement
		// looked, but a concurrent delete committed first (PostgreSQL, under READ COMMITTED).
		if errors.Is(err, sql.ErrNoRows) || err != nil && s.dialect.foreignKeyViolation(err) {
			return store.UserNotFound{ID: userID}
		}
		if err != nil {
			return fmt.Errorf("insert post for user %d: %w", userID, err)
		}
		return complete(ctx, tx, done, p)
	})
	return p, err
}
