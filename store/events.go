// The change log of users: every create, update and delete, in the order the database made them,
// so that clients can watch users change and resume where they left off.
package store

import (
	"context"
	"errors"
	"time"
)

// EventTTL is how long the change log keeps a change at least: a client that was away for less can
// resume without reloading.
const EventTTL = 24 * time.Hour

var (
	// ErrEventsSwept means changes after the requested sequence have been swept from the log: a
	// resume from there would miss them, so the client must reload instead.
	ErrEventsSwept = errors.New("the changes after that sequence are no longer kept")
	// ErrEventsAhead means the requested sequence is newer than any change in the log: the client
	// read it from another database (one restored from a backup, say), so it must reload instead.
	ErrEventsAhead = errors.New("that sequence is newer than every change in the log")
)

// EventKind says what a change did.
type EventKind int8

// The kinds of change, as the change log stores them.
const (
	EventCreated EventKind = iota + 1
	EventUpdated
	// EventDeleted is a delete: a soft delete (the user has DeleteTime and PurgeTime, and keeps its
	// name, since it may be restored) or an immediate one (DeleteUser: the name is gone).
	EventDeleted
	// EventUndeleted is the restore of a deleted user (UndeleteUser).
	EventUndeleted
	// EventPurged is the removal of a user for good (PurgeUser, PurgeExpired): the user as it was,
	// without its name and identity, which leave every earlier change of it too.
	EventPurged
)

func (k EventKind) String() string {
	switch k {
	case EventCreated:
		return "created"
	case EventUpdated:
		return "updated"
	case EventDeleted:
		return "deleted"
	case EventUndeleted:
		return "undeleted"
	case EventPurged:
		return "purged"
	}
	return "unknown"
}

// UserEvent is one change of the log.
type UserEvent struct {
	// Sequence grows with every change, across every process that writes to the database; it may
	// skip numbers, never repeats and never goes back.
	Sequence int64
	Kind     EventKind
	// User is the user as the change left it (for a soft delete, with both times set); for an
	// immediate delete or a purge, as it was before.
	User User
	// PreviousRole is the role the user had before an update; empty for every other kind.
	PreviousRole string
	// Actor is who made the change (WithActor); the zero Actor if the write named no one.
	Actor Actor
	// At is when the change was written, by the database's clock.
	At time.Time
}

// HasRole reports whether the change concerns a user with the role, before or after it.
func (e UserEvent) HasRole(role string) bool {
	return e.User.Role == role || (e.Kind == EventUpdated && e.PreviousRole == role)
}

// UserEvents is a stretch of the change log.
type UserEvents struct {
	Events []UserEvent // oldest first
	// Latest is the sequence of the newest change in the log, or the newest swept one if none is
	// kept: where a reader is once it has read everything.
	Latest int64
}

// ChangeLog is the part of a Store that keeps the change log.
type ChangeLog interface {
	// UserEvents returns up to limit changes with a sequence above after, oldest first, and the
	// newest sequence, from one snapshot. It fails with ErrEventsSwept if a change after after has
	// been swept, and with ErrEventsAhead if after is above Latest. A negative after reads no change
	// and only reports Latest: where a reader that starts now starts.
	UserEvents(ctx context.Context, after int64, limit int) (UserEvents, error)
	// DeleteExpiredUserEvents deletes up to limit of the oldest changes written more than EventTTL
	// ago, but not those an enabled webhook subscription has not been sent yet while they are
	// younger than WebhookOwedTTL, and reports how many it deleted, so that a sweeper can work in
	// short batches.
	DeleteExpiredUserEvents(ctx context.Context, limit int) (int, error)
	// NotifyUserEvents sends on wake, without blocking, when changes may have been added to the log,
	// by this process or (where the database is shared) by another, until stop is called. Notices
	// can be merged or, while a connection is down, missed: a reader also reads the log now and
	// then without one.
	NotifyUserEvents(wake chan<- struct{}) (stop func())
}
