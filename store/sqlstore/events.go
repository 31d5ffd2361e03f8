// The change log of users: written by the schema's triggers in each write's own transaction
// (migrations 0006 on SQLite, 0008 on PostgreSQL, and the kinds of soft delete in 0012 and 0017),
// read here, and swept of changes past store.EventTTL.
package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sync"

	"usersd/store"
)

// The statements that read the log, kept here for the plan tests: each must seek the primary key.
const (
	// readEventsQuery reads the changes after $1, up to $2, with the swept and the newest sequence.
	readEventsQuery = `
		SELECT w.through, COALESCE((SELECT MAX(sequence) FROM user_events), w.through),
		       e.sequence, e.kind, e.user_id, e.name, e.role, e.previous_role, e.created_at, e.updated_at, e.version, e.actor, e.actor_type,
		       e.user_name, e.given_name, e.family_name, e.email, e.external_id, e.active, e.labels, e.delete_time, e.purge_time, e.at
		FROM user_events_swept w
		LEFT JOIN (SELECT * FROM user_events WHERE sequence > $1 ORDER BY sequence LIMIT $2) e ON TRUE`
	// oldestEventsQuery reads the oldest $1 changes' sequences and times, for the sweep.
	oldestEventsQuery = `SELECT sequence, at FROM user_events ORDER BY sequence LIMIT $1`
)

// UserEvents reads the changes after after, the newest sequence and the newest swept one in one
// statement, and so from one snapshot on every backend: a sweep between two reads could otherwise
// delete changes that a check of the swept sequence had just found kept.
func (s *Store) UserEvents(ctx context.Context, after int64, limit int) (_ store.UserEvents, err error) {
	defer s.classify(ctx, &err)
	fromNow := after < 0
	if fromNow {
		limit = 0
	}
	rows, err := s.reader.QueryContext(ctx, readEventsQuery, after, limit)
	if err != nil {
		return store.UserEvents{}, fmt.Errorf("read user events after %d: %w", after, err)
	}
	defer rows.Close()
	var out store.UserEvents
	var swept int64
	for rows.Next() {
		var sequence, kind, userID, created, updated, version, actorType sql.NullInt64
		var name, role, previousRole, actor sql.NullString
		var userName, givenName, familyName, email, externalID, labelsText sql.NullString
		var active sql.NullBool
		var deleted, purge, at sql.NullInt64
		if err := rows.Scan(&swept, &out.Latest, &sequence, &kind, &userID, &name, &role, &previousRole, &created, &updated, &version, &actor, &actorType,
			&userName, &givenName, &familyName, &email, &externalID, &active, &labelsText, &deleted, &purge, &at); err != nil {
			return store.UserEvents{}, fmt.Errorf("read user events after %d: %w", after, err)
		}
		if !sequence.Valid {
			continue // the one row of an empty stretch
		}
		labels, err := decodeLabels(labelsText.String)
		if err != nil {
			return store.UserEvents{}, fmt.Errorf("read user event %d: %w", sequence.Int64, err)
		}
		out.Events = append(out.Events, store.UserEvent{
			Sequence: sequence.Int64,
			Kind:     store.EventKind(kind.Int64),
			User: store.User{
				ID: int32(userID.Int64), Name: name.String, Role: role.String,
				CreatedAt: fromMicros(created.Int64), UpdatedAt: fromMicros(updated.Int64), Version: version.Int64,
				DeleteTime: optionalMicros(deleted), PurgeTime: optionalMicros(purge),
				Identity: store.Identity{
					UserName: userName.String, GivenName: givenName.String, FamilyName: familyName.String,
					Email: email.String, ExternalID: externalID.String, Inactive: active.Valid && !active.Bool, Labels: labels,
				},
			},
			PreviousRole: previousRole.String,
			Actor:        store.Actor{Name: actor.String, Type: store.ActorType(actorType.Int64)},
			At:           fromMicros(at.Int64),
		})
	}
	if err := rows.Err(); err != nil {
		return store.UserEvents{}, fmt.Errorf("read user events after %d: %w", after, err)
	}
	// The join keeps the page's rows but not, by any rule of SQL, their order; sorting at most limit
	// rows here keeps a sort out of the plan.
	slices.SortFunc(out.Events, func(a, b store.UserEvent) int { return cmp.Compare(a.Sequence, b.Sequence) })
	switch {
	case fromNow:
	case after < swept:
		return store.UserEvents{}, fmt.Errorf("resume after %d, swept through %d: %w", after, swept, store.ErrEventsSwept)
	case after > out.Latest:
		return store.UserEvents{}, fmt.Errorf("resume after %d, newest %d: %w", after, out.Latest, store.ErrEventsAhead)
	}
	return out, nil
}

// DeleteExpiredUserEvents deletes the oldest changes, up to limit, written before
// store.EventTTL ago. It deletes a stretch from the oldest change on and stops at the first one
// that is still fresh, so that the log always holds every change after the newest swept one,
// which it records in the same transaction: a resume from before that is refused, never served
// with a hole in it.
func (s *Store) DeleteExpiredUserEvents(ctx context.Context, limit int) (_ int, err error) {
	if err := s.refuseWrite(); err != nil {
		return 0, err
	}
	defer s.classifyWrite(ctx, &err)
	cutoff := micros(s.now().Add(-store.EventTTL))
	deleted := 0
	// Not batched: a sweep deletes up to limit rows, and the requests' writes must not wait for it.
	err = inTx(ctx, s.writer, nil, func(tx *sql.Tx) error {
		// What an enabled webhook subscription has not been sent yet stays, up to WebhookOwedTTL.
		var owed sql.NullInt64
		if err := tx.QueryRowContext(ctx, `SELECT MIN(delivered) FROM webhooks WHERE enabled`).Scan(&owed); err != nil {
			return err
		}
		owedCutoff := micros(s.now().Add(-store.WebhookOwedTTL))
		rows, err := tx.QueryContext(ctx, oldestEventsQuery, limit)
		if err != nil {
			return err
		}
		var through int64
		for rows.Next() {
			var sequence, at int64
			if err := rows.Scan(&sequence, &at); err != nil {
				rows.Close()
				return err
			}
			if at >= cutoff || owed.Valid && sequence > owed.Int64 && at >= owedCutoff {
				break
			}
			through = sequence
			deleted++
		}
		rows.Close()
		if err := rows.Err(); err != nil || deleted == 0 {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM user_events WHERE sequence <= $1`, through); err != nil {
			return err
		}
		// Another replica's sweep may have gone further meanwhile; the swept sequence never goes back.
		_, err = tx.ExecContext(ctx, `UPDATE user_events_swept SET through = CASE WHEN through < $1 THEN $1 ELSE through END`, through)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("delete expired user events: %w", err)
	}
	return deleted, nil
}

// NotifyUserEvents sends on wake after every write of a user that this process commits and, on
// PostgreSQL, whenever another process commits one (see listen.go).
func (s *Store) NotifyUserEvents(wake chan<- struct{}) (stop func()) {
	return s.notices.subscribe(wake)
}

// notices passes word of new changes to whoever waits for it. Where other processes write too
// (PostgreSQL), listen brings word of their changes: it runs while anyone waits, until its context
// ends, so a process holds its connection only from the first subscription (the watches' feed,
// from the first watch on) to the last one's stop.
type notices struct {
	listen func(ctx context.Context, notify func())

	mu            sync.Mutex
	wakes         map[*chan<- struct{}]struct{}
	stopListening context.CancelFunc
	closed        bool
	listening     sync.WaitGroup
}

func (n *notices) subscribe(wake chan<- struct{}) (stop func()) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.wakes == nil {
		n.wakes = map[*chan<- struct{}]struct{}{}
	}
	key := &wake
	n.wakes[key] = struct{}{}
	if n.listen != nil && n.stopListening == nil && !n.closed {
		ctx, cancel := context.WithCancel(context.Background())
		n.stopListening = cancel
		n.listening.Go(func() { n.listen(ctx, n.send) })
	}
	return func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		delete(n.wakes, key)
		if len(n.wakes) == 0 {
			n.quiet()
		}
	}
}

// quiet stops listening, if it listens; the caller holds mu.
func (n *notices) quiet() {
	if n.stopListening != nil {
		n.stopListening()
		n.stopListening = nil
	}
}

// close stops listening for good and waits until the listener has let its connection go.
func (n *notices) close() {
	n.mu.Lock()
	n.closed = true
	n.quiet()
	n.mu.Unlock()
	n.listening.Wait()
}

// send wakes every subscriber that is not awake already; it never blocks.
func (n *notices) send() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for wake := range n.wakes {
		select {
		case *wake <- struct{}{}:
		default:
		}
	}
}
