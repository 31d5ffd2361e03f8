// Package store defines the storage that the service's handlers need: users, their posts, and the
// errors a backend reports. Implementations live in subpackages (sqlstore); the conformance suite in
// storetest holds every implementation to the same behaviour.
package store

import (
	"context"
	"errors"
	"time"
)

// Errors that every Store reports in the same way, so that the handlers can map them to one client
// error each. Implementations wrap them with context; test with errors.Is.
var (
	// ErrNotFound means the user (or the user that owns a post) does not exist.
	ErrNotFound = errors.New("not found")
	// ErrUnavailable means the backend cannot be reached right now; the request may be retried.
	ErrUnavailable = errors.New("store unavailable")
)

// User is a stored user.
type User struct {
	ID        int32
	Name      string
	Role      string // empty when the user has no role
	CreatedAt time.Time
	UpdatedAt time.Time
	// Version starts at 1 and grows by one on every write; the entity tag is derived from it.
	Version int64
}

// Post is a stored post of one user.
type Post struct {
	ID        int32
	UserID    int32
	Title     string
	Body      string
	CreatedAt time.Time
}

// NewUser holds the writable fields of a user to create.
type NewUser struct {
	Name string
	Role string
}

// UserChanges names the fields of a user to set; a nil field is left as it is.
type UserChanges struct {
	Name *string
	Role *string
}

// NewPost holds the writable fields of a post to create.
type NewPost struct {
	Title string
	Body  string
}

// SortField is an attribute that users can be sorted by.
type SortField string

// The sortable attributes, named as in the collection query of SPEC.md section 3.1.
const (
	SortByID        SortField = "id"
	SortByName      SortField = "name"
	SortByRole      SortField = "role"
	SortByCreatedAt SortField = "createdAt"
)

// SortKey is one attribute of a sort order.
type SortKey struct {
	Field      SortField
	Descending bool
}

// UserQuery selects one page of users.
type UserQuery struct {
	Role   string    // exact match; empty means every role
	Sort   []SortKey // applied in order; ties always break by id ascending
	Offset int64
	Limit  int
}

// Page is one page of a collection and the number of items across all pages.
type Page[T any] struct {
	Items []T
	Total int64
}

// Store keeps users and posts. Every method is safe for concurrent use; concurrent writes wait for
// their turn rather than fail.
type Store interface {
	GetUser(ctx context.Context, id int32) (User, error)
	ListUsers(ctx context.Context, q UserQuery) (Page[User], error)
	CreateUser(ctx context.Context, u NewUser) (User, error)
	// UpdateUser applies changes atomically and bumps the version, even when changes is empty.
	UpdateUser(ctx context.Context, id int32, changes UserChanges) (User, error)
	// DeleteUser removes the user and the user's posts.
	DeleteUser(ctx context.Context, id int32) error

	// ListPosts returns a page of the user's posts by id ascending; ErrNotFound if there is no such user.
	ListPosts(ctx context.Context, userID int32, offset int64, limit int) (Page[Post], error)
	// CreatePost adds a post; ErrNotFound if there is no such user.
	CreatePost(ctx context.Context, userID int32, p NewPost) (Post, error)

	// Ping reports whether the backend answers; it returns an error wrapping ErrUnavailable if not.
	Ping(ctx context.Context) error
	Close() error
}
