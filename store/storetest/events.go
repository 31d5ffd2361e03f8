// Cases of the change log: what each write leaves in it, resuming, sweeping, and order under
// concurrent writers.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"usersd/store"
)

// readEvents reads every change after after, in pages of limit.
func readEvents(t *testing.T, s store.Store, after int64, limit int) []store.UserEvent {
	t.Helper()
	var all []store.UserEvent
	for {
		page, err := s.UserEvents(context.Background(), after, limit)
		if err != nil {
			t.Fatalf("events after %d: %v", after, err)
		}
		all = append(all, page.Events...)
		if len(page.Events) < limit {
			return all
		}
		after = page.Events[len(page.Events)-1].Sequence
	}
}

func describeEvent(e store.UserEvent) string {
	return fmt.Sprintf("%s user %d %q role %q (was %q) v%d", e.Kind, e.User.ID, e.User.Name, e.User.Role, e.PreviousRole, e.User.Version)
}

func testEveryWriteIsOneEvent(t *testing.T, s store.Store) {
	ctx := context.Background()
	start, err := s.UserEvents(ctx, 0, 0)
	if err != nil || start.Latest != 0 || len(start.Events) != 0 {
		t.Fatalf("a new store's log: %+v, %v; want empty at sequence 0", start, err)
	}
	ada := mustCreate(t, s, "Ada", "admin")
	member := "member"
	updated, err := s.UpdateUser(ctx, ada.ID, store.UserChanges{Role: &member}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Writes that fail change nothing, so they leave nothing in the log.
	if _, err := s.UpdateUser(ctx, ada.ID, store.UserChanges{}, store.IfVersion{1}); !errors.Is(err, store.ErrVersionMismatch) {
		t.Fatalf("stale update: %v", err)
	}
	if err := s.DeleteUser(ctx, ada.ID+100, nil); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("delete of a missing user: %v", err)
	}
	if _, err := s.CreatePost(ctx, ada.ID, store.NewPost{Title: "posts are not in the user log"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteUser(ctx, ada.ID, nil); err != nil {
		t.Fatal(err)
	}

	events := readEvents(t, s, 0, 10)
	// Once the user is deleted, the log no longer holds the name, in any of its changes.
	forgotten := func(u store.User) store.User { u.Name = ""; return u }
	want := []store.UserEvent{
		{Kind: store.EventCreated, User: forgotten(ada)},
		{Kind: store.EventUpdated, User: forgotten(updated), PreviousRole: "admin"},
		{Kind: store.EventDeleted, User: forgotten(updated)},
	}
	if len(events) != len(want) {
		t.Fatalf("log %v, want %d changes", mapEvents(events), len(want))
	}
	for i, e := range events {
		if e.Kind != want[i].Kind || !sameUser(e.User, want[i].User) || e.PreviousRole != want[i].PreviousRole {
			t.Errorf("change %d: %s, want %s", i, describeEvent(e), describeEvent(want[i]))
		}
		if i > 0 && e.Sequence <= events[i-1].Sequence {
			t.Errorf("change %d has sequence %d after %d; want growing sequences", i, e.Sequence, events[i-1].Sequence)
		}
	}
	latest, err := s.UserEvents(ctx, events[2].Sequence, 10)
	if err != nil || latest.Latest != events[2].Sequence || len(latest.Events) != 0 {
		t.Fatalf("after the last change: %+v, %v; want nothing more, latest %d", latest, err, events[2].Sequence)
	}
}

func mapEvents(events []store.UserEvent) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = fmt.Sprintf("%d: %s", e.Sequence, describeEvent(e))
	}
	return out
}

func testEventResume(t *testing.T, s store.Store) {
	ctx := context.Background()
	for i := range 7 {
		mustCreate(t, s, fmt.Sprintf("user %d", i), "")
	}
	all := readEvents(t, s, 0, 100)
	if len(all) != 7 {
		t.Fatalf("log %v, want 7 creates", mapEvents(all))
	}
	// Any sequence read is a resume point: what follows is the rest of the log, paged or not.
	for i, e := range all {
		if got := readEvents(t, s, e.Sequence, 2); !slices.Equal(sequences(got), sequences(all[i+1:])) {
			t.Errorf("resume after %d: %v, want %v", e.Sequence, sequences(got), sequences(all[i+1:]))
		}
	}
	last := all[len(all)-1].Sequence
	if now, err := s.UserEvents(ctx, -1, 10); err != nil || now.Latest != last || len(now.Events) != 0 {
		t.Fatalf("reading from now: %+v, %v; want no change and latest %d", now, err, last)
	}
	if _, err := s.UserEvents(ctx, last+1, 10); !errors.Is(err, store.ErrEventsAhead) {
		t.Fatalf("resume after %d with the newest change at %d: %v, want ErrEventsAhead", last+1, last, err)
	}
}

func sequences(events []store.UserEvent) []int64 {
	out := make([]int64, len(events))
	for i, e := range events {
		out[i] = e.Sequence
	}
	return out
}

// The log's clock is the database's, which Clock cannot move back; moving the store's clock a day
// forward makes every change so far a day old.
func testEventSweep(t *testing.T, s store.Store, clock *Clock) {
	ctx := context.Background()
	for i := range 3 {
		mustCreate(t, s, fmt.Sprintf("user %d", i), "")
	}
	all := readEvents(t, s, 0, 10)
	if n, err := s.DeleteExpiredUserEvents(ctx, 10); n != 0 || err != nil {
		t.Fatalf("sweeping fresh changes deleted %d, %v; want 0", n, err)
	}
	clock.Advance(store.EventTTL + time.Minute)
	for _, want := range []int{2, 1, 0} {
		if n, err := s.DeleteExpiredUserEvents(ctx, 2); n != want || err != nil {
			t.Fatalf("sweep in batches of 2 deleted %d, %v; want %d", n, err, want)
		}
	}
	// Every resume from before the last swept change would miss one: refused, so the client
	// reloads. From the last swept change on, nothing is missing.
	for _, after := range []int64{0, all[0].Sequence, all[1].Sequence} {
		if _, err := s.UserEvents(ctx, after, 10); !errors.Is(err, store.ErrEventsSwept) {
			t.Errorf("resume after %d with %v swept: %v, want ErrEventsSwept", after, sequences(all), err)
		}
	}
	page, err := s.UserEvents(ctx, all[2].Sequence, 10)
	if err != nil || page.Latest != all[2].Sequence || len(page.Events) != 0 {
		t.Fatalf("resume after the last swept change: %+v, %v; want an empty log at %d", page, err, all[2].Sequence)
	}
	// A sequence is never handed out again, even the newest one's once it is swept.
	next := mustCreate(t, s, "after the sweep", "")
	if got := readEvents(t, s, all[2].Sequence, 10); len(got) != 1 || got[0].Sequence <= all[2].Sequence || got[0].User.ID != next.ID {
		t.Fatalf("after the sweep: %v, want one create above %d", mapEvents(got), all[2].Sequence)
	}
}

// Writers that commit in any order must never let a reader that follows the log skip a change: a
// reader that has read up to a sequence must have read everything below it.
func testEventOrderUnderConcurrentWrites(t *testing.T, s store.Store) {
	ctx := context.Background()
	const writers, writesEach = 8, 25
	seed := mustCreate(t, s, "seed", "")
	after := readEvents(t, s, 0, 10)[0].Sequence

	done := make(chan struct{})
	var followed []store.UserEvent
	var followErr error
	var reader sync.WaitGroup
	reader.Go(func() {
		position := after
		for {
			finished := false
			select {
			case <-done:
				finished = true // one more read after the last write, then stop
			default:
			}
			page, err := s.UserEvents(ctx, position, 1000)
			if err != nil {
				followErr = err
				return
			}
			followed = append(followed, page.Events...)
			if n := len(page.Events); n > 0 {
				position = page.Events[n-1].Sequence
			}
			if finished && len(page.Events) < 1000 {
				return
			}
		}
	})
	var wg sync.WaitGroup
	errs := make(chan error, writers*writesEach)
	for w := range writers {
		wg.Go(func() {
			for i := range writesEach {
				name := fmt.Sprintf("writer %d write %d", w, i)
				var err error
				if i%2 == 0 {
					_, err = s.CreateUser(ctx, store.NewUser{Name: name}, nil)
				} else {
					_, err = s.UpdateUser(ctx, seed.ID, store.UserChanges{Name: &name}, nil)
				}
				if err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(done)
	reader.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if followErr != nil {
		t.Fatal(followErr)
	}
	logged := readEvents(t, s, after, 1000)
	if len(logged) != writers*writesEach {
		t.Fatalf("the log holds %d changes after %d writes", len(logged), writers*writesEach)
	}
	if !slices.Equal(sequences(followed), sequences(logged)) {
		t.Fatalf("a reader following the log read %d changes, the log holds %d: sequence order is not commit order",
			len(followed), len(logged))
	}
	// The seed's updates are in the log in the order of their versions.
	var versions []int64
	for _, e := range logged {
		if e.User.ID == seed.ID {
			versions = append(versions, e.User.Version)
		}
	}
	if !slices.IsSorted(versions) {
		t.Fatalf("the seed's versions in log order: %v, want growing", versions)
	}
}

func testEventNotices(t *testing.T, s store.Store) {
	ctx := context.Background()
	wake := make(chan struct{}, 1)
	stop := s.NotifyUserEvents(wake)
	u := mustCreate(t, s, "noticed", "")
	select {
	case <-wake:
	case <-time.After(5 * time.Second):
		t.Fatal("no notice within 5s of a create")
	}
	if err := s.DeleteUser(ctx, u.ID, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wake:
	case <-time.After(5 * time.Second):
		t.Fatal("no notice within 5s of a delete")
	}
	stop()
	// A stopped subscription is sent nothing. What came before the stop is drained first: on
	// PostgreSQL, the listener also wakes its subscribers once when it starts listening, which may
	// come after the notices above.
	select {
	case <-wake:
	default:
	}
	mustCreate(t, s, "unnoticed", "")
	select {
	case <-wake:
		t.Fatal("a notice after stop")
	case <-time.After(200 * time.Millisecond):
	}
}

// testEachChangeRecordsItsActor: every change carries the actor of its write (store.WithActor) with
// its type, a delete its deleter's rather than the last writer's, a write without one none, and a
// write that fails leaves neither a change nor its actor behind. A key and a token of one name
// stay two actors.
func testEachChangeRecordsItsActor(t *testing.T, s store.Store) {
	as := func(actor string) context.Context {
		return store.WithActor(context.Background(), store.Actor{Name: actor, Type: store.ActorAPIKey})
	}
	asToken := func(subject string) context.Context {
		return store.WithActor(context.Background(), store.Actor{Name: subject, Type: store.ActorToken})
	}
	ada, err := s.CreateUser(as("importer"), store.NewUser{Name: "Ada"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	role := "editor"
	updated, err := s.UpdateUser(asToken("importer"), ada.ID, store.UserChanges{Role: &role}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteUser(asToken("mallory"), ada.ID, store.IfVersion{ada.Version}); !errors.Is(err, store.ErrVersionMismatch) {
		t.Fatalf("a delete with a stale version: %v", err)
	}
	name := "Ada L."
	if _, err := s.UpdateUser(context.Background(), ada.ID, store.UserChanges{Name: &name}, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteUser(asToken("remover"), ada.ID, store.IfVersion{updated.Version + 1}); err != nil {
		t.Fatal(err)
	}
	types := map[store.ActorType]string{store.ActorUnknown: "nobody", store.ActorAPIKey: "key", store.ActorToken: "token"}
	var actors []string
	for _, e := range readEvents(t, s, 0, 10) {
		actors = append(actors, fmt.Sprintf("%s by %s %q", e.Kind, types[e.Actor.Type], e.Actor.Name))
	}
	if want := []string{`created by key "importer"`, `updated by token "importer"`, `updated by nobody ""`, `deleted by token "remover"`}; !slices.Equal(actors, want) {
		t.Fatalf("the log's changes: %q, want %q", actors, want)
	}
}
