// Posts: a user's posts, listed by id, and created only for a user that exists.
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
func (s *Store) ListPosts(ctx context.Context, userID int32, offset int64, limit int) (store.Page[store.Post], error) {
	var page store.Page[store.Post]
	err := s.inReadTx(ctx, func(tx *sql.Tx) error {
		var exists bool
		if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM users WHERE id = ?)`, userID).Scan(&exists); err != nil {
			return fmt.Errorf("find user %d: %w", userID, err)
		}
		if !exists {
			return fmt.Errorf("user %d %w", userID, store.ErrNotFound)
		}
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM posts WHERE user_id = ?`, userID).Scan(&page.Total); err != nil {
			return fmt.Errorf("count posts of user %d: %w", userID, err)
		}
		rows, err := tx.QueryContext(ctx, `SELECT `+postColumns+` FROM posts WHERE user_id = ? ORDER BY id LIMIT ? OFFSET ?`,
			userID, limit, offset)
		if page.Items, err = rowsOf(rows, err, scanPost); err != nil {
			return fmt.Errorf("list posts of user %d: %w", userID, err)
		}
		return nil
	})
	return page, err
}

// CreatePost inserts the post only if its user exists, checked in the same statement, so that a
// concurrent delete of the user cannot leave an orphan.
func (s *Store) CreatePost(ctx context.Context, userID int32, np store.NewPost) (store.Post, error) {
	row := s.writer.QueryRowContext(ctx,
		`INSERT INTO posts (user_id, title, body, created_at)
		 SELECT ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM users WHERE id = ?)
		 RETURNING `+postColumns,
		userID, np.Title, np.Body, micros(s.now()), userID)
	p, err := scanPost(row)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Post{}, fmt.Errorf("user %d %w", userID, store.ErrNotFound)
	}
	if err != nil {
		return store.Post{}, fmt.Errorf("insert post for user %d: %w", userID, err)
	}
	return p, nil
}
