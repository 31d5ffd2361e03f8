// Package store defines the storage that the service's rules (package users) need: users, their
// posts, and the errors a backend reports. Implementations live in subpackages (sqlstore); the
// conformance suite in storetest holds every implementation to the same behaviour.
package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// UserNotFound is the ErrNotFound of the user with ID, which a Store returns (wrapped or not) so
// that the client's error can name the id: errors.Is(err, ErrNotFound) holds, and errors.As finds
// the id.
type UserNotFound struct{ ID int32 }

func (e UserNotFound) Error() string { return fmt.Sprintf("user %d not found", e.ID) }

// Is makes errors.Is(err, ErrNotFound) hold for a UserNotFound.
func (e UserNotFound) Is(target error) bool { return target == ErrNotFound }

// Errors that every Store reports in the same way, so that the service can map them to one client
// error each. Implementations wrap them with context; test with errors.Is.
var (
	// ErrNotFound means the user (or the user that owns a post) does not exist.
	ErrNotFound = errors.New("not found")
	// ErrUnavailable means the backend cannot be reached right now; the request may be retried.
	ErrUnavailable = errors.New("store unavailable")
	// ErrVersionMismatch means a conditional write found the user at a version other than the ones it
	// was conditioned on; nothing was written.
	ErrVersionMismatch = errors.New("version mismatch")
	// ErrRequestInProgress means an idempotency key is held by a request that has not finished.
	ErrRequestInProgress = errors.New("request in progress")
	// ErrRequestMismatch means an idempotency key was used before with a different request.
	ErrRequestMismatch = errors.New("idempotency key used with another request")
	// ErrAlreadyExists means a write would give a user a value that another user holds in a field
	// that must be unique (see Taken); nothing was written.
	ErrAlreadyExists = errors.New("already exists")
	// ErrTooManyLabels means a change of a user's labels would leave more than MaxLabels.
	ErrTooManyLabels = errors.New("too many labels")
)

// ItemError is the error of one item of a batch (CreateUsers, SoftDeleteUsers, DeleteUsers) that
// failed the whole batch: Index is the item's place in the batch, from 0, and Err what it met, so
// that errors.Is and errors.As see through it (a Taken, a UserNotFound).
type ItemError struct {
	Index int
	Err   error
}

func (e ItemError) Error() string { return fmt.Sprintf("item %d of the batch: %v", e.Index, e.Err) }

// Unwrap returns what the item met.
func (e ItemError) Unwrap() error { return e.Err }

// MaxLabels is how many labels a user may have: a patch of some keys is checked against it only
// once merged with the stored labels, which the store alone sees.
const MaxLabels = 32

// Taken is the ErrAlreadyExists of one unique field: errors.Is(err, ErrAlreadyExists) holds, and
// errors.As finds the field, named as in the proto (user_name, email, external_id).
type Taken struct{ Field string }

func (e Taken) Error() string { return "another user already has this " + e.Field }

// Is makes errors.Is(err, ErrAlreadyExists) hold for a Taken.
func (e Taken) Is(target error) bool { return target == ErrAlreadyExists }

// User is a stored user.
type User struct {
	ID        int32
	Name      string
	Role      string // empty when the user has no role
	CreatedAt time.Time
	UpdatedAt time.Time
	// Version starts at 1 and grows by one on every write; the entity tag is derived from it.
	Version int64
	// DeleteTime and PurgeTime are zero unless the user is deleted (SoftDeleteUser): then they say
	// when it was deleted and when it goes for good. Only the reads that show deleted users
	// (GetUserShowingDeleted, UserQuery.ShowDeleted) and the change log ever return such a user.
	DeleteTime time.Time
	PurgeTime  time.Time
	Identity
}

// Deleted reports whether u is deleted but not yet purged.
func (u User) Deleted() bool { return !u.DeleteTime.IsZero() }

// Identity is what a user is known by beside the name: the fields of a user that a provisioning
// system writes. The empty strings mean none; user_name and email are unique ignoring case
// (NameKey), external_id exactly, each among the non-empty values.
type Identity struct {
	UserName   string
	GivenName  string
	FamilyName string
	Email      string
	ExternalID string
	// Inactive is the contract's active, the other way round, so that the zero Identity is the
	// default one: an active user.
	Inactive bool
	Labels   map[string]string // nil or empty: no labels
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
	Identity
}

// UserChanges names the fields of a user to set; a nil field is left as it is.
type UserChanges struct {
	Name       *string
	Role       *string
	UserName   *string
	GivenName  *string
	FamilyName *string
	Email      *string
	ExternalID *string
	Inactive   *bool
	// Labels, when not nil, replaces every label (an empty map removes them all); LabelChanges then
	// applies on top of it, or, without it, on top of the stored labels: a key with a value sets
	// that label, a key with nil removes it. The result must have at most MaxLabels labels
	// (ErrTooManyLabels).
	Labels       *map[string]string
	LabelChanges map[string]*string
}

// IsEmpty reports whether c changes no field.
func (c UserChanges) IsEmpty() bool {
	return c.Name == nil && c.Role == nil && c.UserName == nil && c.GivenName == nil && c.FamilyName == nil &&
		c.Email == nil && c.ExternalID == nil && c.Inactive == nil && c.Labels == nil && len(c.LabelChanges) == 0
}

// ApplyLabels returns the labels that c leaves a user with who has stored.
func (c UserChanges) ApplyLabels(stored map[string]string) map[string]string {
	out := map[string]string{}
	if c.Labels != nil {
		stored = *c.Labels
	}
	for k, v := range stored {
		out[k] = v
	}
	for k, v := range c.LabelChanges {
		if v == nil {
			delete(out, k)
		} else {
			out[k] = *v
		}
	}
	return out
}

// NewPost holds the writable fields of a post to create.
type NewPost struct {
	Title string
	Body  string
}

// SortField is an attribute that users can be sorted by.
type SortField string

// The sortable attributes, named as in the collection query (the proto's ListUsersRequest.sort).
const (
	SortByID        SortField = "id"
	SortByName      SortField = "name"
	SortByRole      SortField = "role"
	SortByCreatedAt SortField = "createdAt"
	// SortByUserName sorts by the user name ignoring case (its NameKey), as SCIM sorts userName.
	// One index serves both directions, so the ties (the users without a user name) break by id
	// in the sort's direction; it is served alone, without the role filter and the name search.
	SortByUserName SortField = "userName"
)

// SortKey is one attribute of a sort order.
type SortKey struct {
	Field      SortField
	Descending bool
}

// UserQuery selects one page of users.
type UserQuery struct {
	Role string // exact match; empty means every role
	// NamePrefix keeps the users whose name starts with it, ignoring case (see NameKey); empty
	// means every name.
	NamePrefix string
	Sort       []SortKey // applied in order; ties always break by id ascending
	// After, when set, starts the page right after that position in the sort order (keyset paging):
	// the page costs the same however deep it is. Offset is then 0.
	After  *UserCursor
	Offset int64
	Limit  int
	// ShowDeleted includes the deleted users that are not yet purged, in the page and in the total;
	// without it they are left out of both, as if they did not exist.
	ShowDeleted bool
	// Filter, when set, keeps the users it holds for, in the page and in the total, beside Role and
	// NamePrefix (see filter.go).
	Filter *Filter
}

// UserCursor is a position in a sorted list of users: the sort attributes of the user it follows.
// Only the attributes that the query sorts by, and ID, are read.
type UserCursor struct {
	ID        int32
	Name      string
	Role      string
	CreatedAt time.Time
	UserName  string
}

// PostQuery selects one page of a user's posts, by id ascending.
type PostQuery struct {
	// AfterID, when positive, starts the page after the post with that id (keyset paging); Offset
	// is then 0.
	AfterID int32
	Offset  int64
	Limit   int
}

// Page is one page of a collection and the number of items across all pages.
type Page[T any] struct {
	Items []T
	Total int64
	// More reports whether items follow this page.
	More bool
}

// IfVersion is the precondition of a write: the write happens only if the user's current version is
// one of the listed ones, checked and written in one statement. Nil means no precondition; an empty,
// non-nil IfVersion matches no version, so the write fails with ErrVersionMismatch if the user exists.
type IfVersion []int64

// Allows reports whether a user at version passes the precondition.
func (v IfVersion) Allows(version int64) bool {
	return v == nil || slices.Contains(v, version)
}

// Store keeps users, posts and the answers of idempotent requests. Every method is safe for
// concurrent use; concurrent writes wait for their turn rather than fail.
type Store interface {
	GetUser(ctx context.Context, id int32) (User, error)
	ListUsers(ctx context.Context, q UserQuery) (Page[User], error)
	// CreateUser stores a new user with version 1. With a non-nil done, the request that done names
	// is completed in the same transaction, so either both happen or neither.
	CreateUser(ctx context.Context, u NewUser, done *Completion[User]) (User, error)
	// UpdateUser applies changes atomically and bumps the version, even when changes is empty. A user
	// that exists but fails ifVersion is ErrVersionMismatch; a missing one is ErrNotFound.
	UpdateUser(ctx context.Context, id int32, changes UserChanges, ifVersion IfVersion) (User, error)
	// DeleteUser removes the user and the user's posts at once, with the same precondition as
	// UpdateUser: a delete with no retention. A deleted user is ErrNotFound here (PurgeUser removes
	// one).
	DeleteUser(ctx context.Context, id int32, ifVersion IfVersion) error

	// Batches (AIP-231, 233, 235; batch_users.go in each backend): each is all or nothing, in one
	// transaction of its own, so that a failure leaves nothing of the batch behind, and the change
	// log records one change per user, in the batch's order.

	// BatchGetUsers returns the live users with ids, one for each id in its order (an id given twice
	// is answered twice), read from one snapshot. The first id, in the batch's order, that names no
	// live user fails the whole read with its UserNotFound.
	BatchGetUsers(ctx context.Context, ids []int32) ([]User, error)
	// CreateUsers stores new users, in order, each as CreateUser does, and returns them in that
	// order. A user whose unique value another user holds (a stored one, deleted or not, or one
	// earlier in the batch) fails the whole batch with an ItemError of its index around its Taken.
	// done, if not nil, is completed in the same transaction with the created users.
	CreateUsers(ctx context.Context, users []NewUser, done *Completion[[]User]) ([]User, error)
	// SoftDeleteUsers marks the users deleted as SoftDeleteUser does, in the order of ids, and
	// returns them as they are after. The first id that names no live user (a missing or deleted
	// one, or one given before in ids) fails the whole batch with an ItemError of its index around
	// its UserNotFound.
	SoftDeleteUsers(ctx context.Context, ids []int32, purgeAt time.Time) ([]User, error)
	// DeleteUsers removes the users and their posts at once as DeleteUser does, in the order of ids,
	// and fails as SoftDeleteUsers does.
	DeleteUsers(ctx context.Context, ids []int32) error

	// Soft delete (soft_delete.go in each backend). A deleted user is ErrNotFound to every read and
	// write above, and is left out of lists, totals and posts, until UndeleteUser restores it or it
	// is purged. It keeps its unique values meanwhile, so that an undelete can never clash.

	// SoftDeleteUser marks the user deleted now, to be purged at purgeAt, bumps its version and
	// updated_at as an update does, and returns it as it is after (both times set). A deleted or
	// missing user is ErrNotFound; ifVersion is as for UpdateUser.
	SoftDeleteUser(ctx context.Context, id int32, ifVersion IfVersion, purgeAt time.Time) (User, error)
	// UndeleteUser clears both times of a deleted user and bumps its version. A user that is not
	// deleted, or is missing (purged, say), is ErrNotFound.
	UndeleteUser(ctx context.Context, id int32, ifVersion IfVersion) (User, error)
	// PurgeUser removes the user, deleted or not, and its posts at once, and takes its name and
	// identity out of the change log. A missing user is ErrNotFound.
	PurgeUser(ctx context.Context, id int32, ifVersion IfVersion) error
	// GetUserShowingDeleted is GetUser that also finds a deleted user that is not yet purged.
	GetUserShowingDeleted(ctx context.Context, id int32) (User, error)
	// PurgeExpired purges, as PurgeUser does, up to limit deleted users whose purge time is at or
	// before now, and reports how many. Where processes share the database, one purges at a time:
	// a call that finds another purging returns 0 at once.
	PurgeExpired(ctx context.Context, now time.Time, limit int) (int, error)

	// ListPosts returns a page of the user's posts by id ascending; ErrNotFound if there is no such user.
	ListPosts(ctx context.Context, userID int32, q PostQuery) (Page[Post], error)
	// CreatePost adds a post; ErrNotFound if there is no such user. done is as for CreateUser.
	CreatePost(ctx context.Context, userID int32, p NewPost, done *Completion[Post]) (Post, error)

	// BeginRequest starts a request that carries an idempotency key. If no live record holds the key,
	// it reserves the key and returns the reservation, which the create must complete (or the caller
	// abandon). Otherwise it returns the kept answer of the completed request with that key and
	// hash, ErrRequestMismatch if the key was used with another hash, or ErrRequestInProgress if that
	// request is still running. A reservation older than RequestLease and an answer older than
	// RequestTTL are as good as gone. When it fails with the reservation's own statement unanswered
	// (ErrUnavailable), it also returns that reservation: it may have been taken, and the caller
	// abandons it as it would a failed create's.
	BeginRequest(ctx context.Context, key RequestKey, hash []byte) (Reservation, *Answer, error)
	// AbandonRequest releases a reservation whose request failed, so that it can be retried with the
	// same key. A reservation that is no longer held is left as it is.
	AbandonRequest(ctx context.Context, r Reservation) error
	// DeleteExpiredRequests deletes up to limit records older than RequestTTL and reports how many it
	// deleted, so that a sweeper can work in short batches that do not hold up requests.
	DeleteExpiredRequests(ctx context.Context, limit int) (int, error)

	// The change log of users, written in the transaction of each create, update and delete.
	ChangeLog

	// Position returns a position at or after every write that has returned so far, for a read
	// that must see them (Freshness.After). A store without standbys returns 0, which sends such a
	// read to the primary, the one database there is.
	Position(ctx context.Context) (Position, error)

	// Ping reports whether the backend answers and takes writes; it returns an error wrapping
	// ErrUnavailable if not.
	Ping(ctx context.Context) error
	Close() error
}
