// Conformance cases for soft delete (AIP-164): what a deleted user is to every read and write, its
// restore, its purge at once and at its purge time, and what each leaves in the change log.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"usersd/store"
)

// retention is how long the cases keep a deleted user: the contract's default.
const retention = 720 * time.Hour

// mustSoftDelete soft deletes u with the default retention from the clock's now.
func mustSoftDelete(t *testing.T, s store.Store, clock *Clock, u store.User) store.User {
	t.Helper()
	deleted, err := s.SoftDeleteUser(context.Background(), u.ID, store.IfVersion{u.Version}, clock.Now().Add(retention))
	if err != nil {
		t.Fatalf("soft delete user %d: %v", u.ID, err)
	}
	return deleted
}

// totals are a list's totals of every user and of admins, without and with deleted users.
func totals(t *testing.T, s store.Store) [4]int64 {
	t.Helper()
	total := func(role string, showDeleted bool) int64 {
		return mustList(t, s, store.UserQuery{Role: role, Limit: 1, ShowDeleted: showDeleted}).Total
	}
	return [4]int64{total("", false), total("admin", false), total("", true), total("admin", true)}
}

func testSoftDeleteHidesTheUser(t *testing.T, s store.Store, clock *Clock) {
	ctx := context.Background()
	clock.Freeze()
	u := mustCreate(t, s, "Ada", "admin")
	other := mustCreate(t, s, "Adam", "viewer")
	if _, err := s.CreatePost(ctx, u.ID, store.NewPost{Title: "hidden with her"}, nil); err != nil {
		t.Fatal(err)
	}
	if got := totals(t, s); got != [4]int64{2, 1, 2, 1} {
		t.Fatalf("totals before the delete (all, admins, all shown, admins shown) = %v", got)
	}
	clock.Advance(time.Second)
	if _, err := s.SoftDeleteUser(ctx, u.ID, store.IfVersion{u.Version + 1}, clock.Now().Add(retention)); !errors.Is(err, store.ErrVersionMismatch) {
		t.Fatalf("a soft delete at a stale version: %v, want ErrVersionMismatch", err)
	}
	deleted := mustSoftDelete(t, s, clock, u)
	now := clock.Now().UTC().Truncate(time.Microsecond)
	if !deleted.DeleteTime.Equal(now) || !deleted.PurgeTime.Equal(now.Add(retention)) || !deleted.Deleted() {
		t.Fatalf("deleted at %v, to be purged at %v; want %v and %v", deleted.DeleteTime, deleted.PurgeTime, now, now.Add(retention))
	}
	if deleted.Version != u.Version+1 || !deleted.UpdatedAt.Equal(now) || deleted.Name != u.Name || deleted.Role != u.Role {
		t.Fatalf("the deleted user %+v: want %+v with the version bumped and updated now", deleted, u)
	}

	// Missing to every read and write that does not ask for deleted users.
	name := "renamed"
	checks := map[string]error{}
	_, checks["GetUser"] = s.GetUser(ctx, u.ID)
	_, checks["UpdateUser"] = s.UpdateUser(ctx, u.ID, store.UserChanges{Name: &name}, nil)
	_, checks["UpdateUser at its version"] = s.UpdateUser(ctx, u.ID, store.UserChanges{Name: &name}, store.IfVersion{deleted.Version})
	checks["DeleteUser"] = s.DeleteUser(ctx, u.ID, nil)
	checks["DeleteUser at its version"] = s.DeleteUser(ctx, u.ID, store.IfVersion{deleted.Version})
	_, checks["SoftDeleteUser again"] = s.SoftDeleteUser(ctx, u.ID, nil, clock.Now().Add(retention))
	_, checks["SoftDeleteUser again at its version"] = s.SoftDeleteUser(ctx, u.ID, store.IfVersion{deleted.Version}, clock.Now().Add(retention))
	_, checks["ListPosts"] = s.ListPosts(ctx, u.ID, store.PostQuery{Limit: 10})
	_, checks["CreatePost"] = s.CreatePost(ctx, u.ID, store.NewPost{Title: "t"}, nil)
	for op, err := range checks {
		var notFound store.UserNotFound
		if !errors.Is(err, store.ErrNotFound) || !errors.As(err, &notFound) || notFound.ID != u.ID {
			t.Errorf("%s of a deleted user: %v, want UserNotFound{%d}", op, err, u.ID)
		}
	}
	if got := totals(t, s); got != [4]int64{1, 0, 2, 1} {
		t.Fatalf("totals after the delete (all, admins, all shown, admins shown) = %v, want [1 0 2 1]", got)
	}
	for _, q := range []store.UserQuery{{}, {Role: "admin"}, {NamePrefix: "ada"}, {Sort: []store.SortKey{{Field: store.SortByName, Descending: true}}}} {
		q.Limit = 10
		if page := mustList(t, s, q); slices.Contains(ids(page.Items), u.ID) {
			t.Errorf("list %+v shows the deleted user", q)
		}
		q.ShowDeleted = true
		page := mustList(t, s, q)
		i := slices.Index(ids(page.Items), u.ID)
		if i < 0 {
			t.Errorf("list %+v showing deleted users leaves it out", q)
			continue
		}
		if got := page.Items[i]; !sameUser(got, deleted) {
			t.Errorf("list %+v shows %+v, want %+v", q, got, deleted)
		}
	}
	if page := mustList(t, s, store.UserQuery{NamePrefix: "ada", Limit: 10}); page.Total != 1 || len(page.Items) != 1 || page.Items[0].ID != other.ID {
		t.Errorf("a name search without deleted users: %v, total %d; want Adam alone", describe(page.Items), page.Total)
	}
	if page := mustList(t, s, store.UserQuery{NamePrefix: "ada", Limit: 10, ShowDeleted: true}); page.Total != 2 {
		t.Errorf("a name search with deleted users: total %d, want 2", page.Total)
	}
	if got, err := s.GetUserShowingDeleted(ctx, u.ID); err != nil || !sameUser(got, deleted) {
		t.Fatalf("the deleted user shown: %+v, %v; want %+v", got, err, deleted)
	}
	if got, err := s.GetUserShowingDeleted(ctx, other.ID); err != nil || !sameUser(got, other) || got.Deleted() {
		t.Fatalf("a live user shown with the deleted: %+v, %v; want %+v", got, err, other)
	}
	if _, err := s.GetUserShowingDeleted(ctx, 4242); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a missing user shown with the deleted: %v, want ErrNotFound", err)
	}
	if _, err := s.SoftDeleteUser(ctx, 4242, nil, clock.Now().Add(retention)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a soft delete of a missing user: %v, want ErrNotFound", err)
	}

	// A patch of labels is not found either, even one that the stored labels would refuse: what a
	// deleted user holds is not shown through a write's error.
	full := map[string]string{}
	for i := range store.MaxLabels {
		full[fmt.Sprintf("k%d", i)] = "v"
	}
	labelled, err := s.CreateUser(ctx, store.NewUser{Name: "Labelled", Identity: store.Identity{Labels: full}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	mustSoftDelete(t, s, clock, labelled)
	one := "x"
	if _, err := s.UpdateUser(ctx, labelled.ID, store.UserChanges{LabelChanges: map[string]*string{"extra": &one}}, nil); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a label patch of a deleted user with %d labels: %v, want ErrNotFound", store.MaxLabels, err)
	}
}

func testUndelete(t *testing.T, s store.Store, clock *Clock) {
	ctx := context.Background()
	u := mustCreate(t, s, "Ada", "admin")
	post, err := s.CreatePost(ctx, u.ID, store.NewPost{Title: "back with her"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.UndeleteUser(ctx, u.ID, nil); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an undelete of a live user: %v, want ErrNotFound", err)
	}
	if _, err := s.UndeleteUser(ctx, u.ID, store.IfVersion{u.Version}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an undelete of a live user at its version: %v, want ErrNotFound", err)
	}
	if _, err := s.UndeleteUser(ctx, 4242, nil); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an undelete of a missing user: %v, want ErrNotFound", err)
	}
	deleted := mustSoftDelete(t, s, clock, u)
	if _, err := s.UndeleteUser(ctx, u.ID, store.IfVersion{u.Version}); !errors.Is(err, store.ErrVersionMismatch) {
		t.Fatalf("an undelete at a stale version: %v, want ErrVersionMismatch", err)
	}
	restored, err := s.UndeleteUser(ctx, u.ID, store.IfVersion{deleted.Version})
	if err != nil {
		t.Fatal(err)
	}
	if restored.Version != deleted.Version+1 || restored.Deleted() || !restored.PurgeTime.IsZero() || restored.Name != u.Name {
		t.Fatalf("the restored user %+v: want the version bumped past %d and no times", restored, deleted.Version)
	}
	if got, err := s.GetUser(ctx, u.ID); err != nil || !sameUser(got, restored) {
		t.Fatalf("the restored user reads %+v, %v; want %+v", got, err, restored)
	}
	if page, err := s.ListPosts(ctx, u.ID, store.PostQuery{Limit: 10}); err != nil || page.Total != 1 || page.Items[0].ID != post.ID {
		t.Fatalf("the restored user's posts: %+v, %v; want its post back", page, err)
	}
	if got := totals(t, s); got != [4]int64{1, 1, 1, 1} {
		t.Fatalf("totals after the undelete (all, admins, all shown, admins shown) = %v", got)
	}
	if _, err := s.UndeleteUser(ctx, u.ID, nil); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a second undelete: %v, want ErrNotFound", err)
	}
	// Purged: gone for good, and not restored.
	mustSoftDelete(t, s, clock, restored)
	if err := s.PurgeUser(ctx, u.ID, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UndeleteUser(ctx, u.ID, nil); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an undelete of a purged user: %v, want ErrNotFound", err)
	}
}

func testPurge(t *testing.T, s store.Store, clock *Clock) {
	ctx := context.Background()
	live := mustCreate(t, s, "live", "admin")
	gone := mustCreate(t, s, "deleted", "admin")
	kept := mustCreate(t, s, "kept", "admin")
	for _, u := range []store.User{live, gone} {
		if _, err := s.CreatePost(ctx, u.ID, store.NewPost{Title: "goes with its user"}, nil); err != nil {
			t.Fatal(err)
		}
	}
	gone = mustSoftDelete(t, s, clock, gone)
	if err := s.PurgeUser(ctx, live.ID, store.IfVersion{live.Version + 1}); !errors.Is(err, store.ErrVersionMismatch) {
		t.Fatalf("a purge at a stale version: %v, want ErrVersionMismatch", err)
	}
	if err := s.PurgeUser(ctx, live.ID, store.IfVersion{live.Version}); err != nil {
		t.Fatalf("a purge of a live user: %v", err)
	}
	if err := s.PurgeUser(ctx, gone.ID, store.IfVersion{gone.Version}); err != nil {
		t.Fatalf("a purge of a deleted user: %v", err)
	}
	for _, u := range []store.User{live, gone} {
		if _, err := s.GetUserShowingDeleted(ctx, u.ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("user %s after its purge: %v, want ErrNotFound even showing deleted users", u.Name, err)
		}
		if err := s.PurgeUser(ctx, u.ID, nil); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("a second purge of %s: %v, want ErrNotFound", u.Name, err)
		}
		if _, err := s.ListPosts(ctx, u.ID, store.PostQuery{Limit: 10}); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("the posts of %s after its purge: %v, want ErrNotFound", u.Name, err)
		}
	}
	if got := totals(t, s); got != [4]int64{1, 1, 1, 1} {
		t.Fatalf("totals after the purges (all, admins, all shown, admins shown) = %v, want only %q left", got, kept.Name)
	}
	if err := s.PurgeUser(ctx, 4242, nil); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a purge of a missing user: %v, want ErrNotFound", err)
	}
}

func testPurgeExpired(t *testing.T, s store.Store, clock *Clock) {
	ctx := context.Background()
	clock.Freeze()
	start := clock.Now()
	var due []store.User
	for i, wait := range []time.Duration{time.Hour, time.Hour, time.Hour, 2 * time.Hour} {
		u := mustCreate(t, s, "due "+string(rune('a'+i)), "admin")
		if _, err := s.SoftDeleteUser(ctx, u.ID, nil, start.Add(wait)); err != nil {
			t.Fatal(err)
		}
		due = append(due, u)
	}
	live := mustCreate(t, s, "live", "admin")
	purge := func(at time.Duration, limit, want int) {
		t.Helper()
		if n, err := s.PurgeExpired(ctx, start.Add(at), limit); err != nil || n != want {
			t.Fatalf("purge at +%v, up to %d: %d purged, %v; want %d", at, limit, n, err, want)
		}
	}
	purge(0, 10, 0)                          // none due yet
	purge(time.Hour-time.Microsecond, 10, 0) // still none
	purge(time.Hour, 2, 2)                   // due at their purge time, and no more than the limit
	purge(time.Hour, 10, 1)                  // the third due then
	purge(time.Hour+time.Minute, 10, 0)      // the last is not due yet
	if got := totals(t, s); got != [4]int64{1, 1, 2, 2} {
		t.Fatalf("totals after purging three (all, admins, all shown, admins shown) = %v", got)
	}
	purge(3*time.Hour, 10, 1)
	for _, u := range due {
		if _, err := s.GetUserShowingDeleted(ctx, u.ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("user %s after its purge time: %v, want it purged", u.Name, err)
		}
	}
	if got, err := s.GetUser(ctx, live.ID); err != nil || !sameUser(got, live) {
		t.Fatalf("a live user after the purges: %+v, %v; want it untouched", got, err)
	}
	if got := totals(t, s); got != [4]int64{1, 1, 1, 1} {
		t.Fatalf("totals after purging all four = %v", got)
	}
}

// testSoftDeleteEvents: each write of soft delete is one change of its kind; the name stays through
// a soft delete and an undelete, and leaves every change of the user with its purge.
func testSoftDeleteEvents(t *testing.T, s store.Store, clock *Clock) {
	ctx := context.Background()
	by := store.WithActor(ctx, store.Actor{Name: "remover", Type: store.ActorAPIKey})
	ada, err := s.CreateUser(ctx, store.NewUser{Name: "Ada", Role: "admin", Identity: adaIdentity}, nil)
	if err != nil {
		t.Fatal(err)
	}
	deleted, err := s.SoftDeleteUser(by, ada.ID, nil, clock.Now().Add(retention))
	if err != nil {
		t.Fatal(err)
	}
	restored, err := s.UndeleteUser(ctx, ada.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	deletedAgain, err := s.SoftDeleteUser(ctx, ada.ID, nil, clock.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	events := readEvents(t, s, 0, 10)
	want := []struct {
		kind store.EventKind
		user store.User
	}{{store.EventCreated, ada}, {store.EventDeleted, deleted}, {store.EventUndeleted, restored}, {store.EventDeleted, deletedAgain}}
	if len(events) != len(want) {
		t.Fatalf("log %v, want %d changes", mapEvents(events), len(want))
	}
	for i, e := range events {
		if e.Kind != want[i].kind || !sameUser(e.User, want[i].user) || e.User.UserName != adaIdentity.UserName || e.PreviousRole != "" {
			t.Errorf("change %d: %s %+v, want %s %+v with the name and identity kept", i, describeEvent(e), e.User, want[i].kind, want[i].user)
		}
	}
	if events[1].Actor.Name != "remover" {
		t.Errorf("the soft delete's actor is %+v, want remover", events[1].Actor)
	}

	if n, err := s.PurgeExpired(ctx, clock.Now().Add(time.Hour), 10); err != nil || n != 1 {
		t.Fatalf("purge expired: %d, %v; want 1", n, err)
	}
	// A live user purged at once is one purge, after its create, and nothing else.
	grace, err := s.CreateUser(ctx, store.NewUser{Name: "Grace", Role: "viewer", Identity: store.Identity{UserName: "grace", Email: "grace@example.com"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.PurgeUser(by, grace.ID, nil); err != nil {
		t.Fatal(err)
	}
	events = readEvents(t, s, 0, 20)
	var kinds []store.EventKind
	for _, e := range events {
		kinds = append(kinds, e.Kind)
		if id := e.User.Identity; e.User.Name != "" || id.UserName != "" || id.Email != "" || id.ExternalID != "" || id.GivenName != "" || id.FamilyName != "" || len(id.Labels) != 0 {
			t.Errorf("change %s keeps the name or identity of a purged user: %+v", describeEvent(e), e.User)
		}
	}
	wantKinds := []store.EventKind{store.EventCreated, store.EventDeleted, store.EventUndeleted, store.EventDeleted, store.EventPurged,
		store.EventCreated, store.EventPurged}
	if !slices.Equal(kinds, wantKinds) {
		t.Fatalf("log %v, want kinds %v", mapEvents(events), wantKinds)
	}
	if purged := events[4]; purged.User.ID != ada.ID || purged.User.Role != "admin" || !purged.User.PurgeTime.Equal(deletedAgain.PurgeTime) || purged.Actor != (store.Actor{}) {
		t.Errorf("the purge at the purge time: %+v by %+v; want Ada's id, role and times, by no one", purged.User, purged.Actor)
	}
	if purged := events[6]; purged.User.ID != grace.ID || purged.User.Role != "viewer" || purged.Actor.Name != "remover" {
		t.Errorf("the purge of a live user: %+v by %+v; want Grace's id and role, by remover", purged.User, purged.Actor)
	}
	if store.EventUndeleted != 4 || store.EventPurged != 5 {
		t.Fatalf("the stored numbers of the kinds moved: undeleted %d, purged %d", store.EventUndeleted, store.EventPurged)
	}
}

// testDeletedUserHoldsItsUniqueValues: user_name and email are unique among users not yet purged.
func testDeletedUserHoldsItsUniqueValues(t *testing.T, s store.Store, clock *Clock) {
	ctx := context.Background()
	ada, err := s.CreateUser(ctx, store.NewUser{Name: "Ada", Identity: adaIdentity}, nil)
	if err != nil {
		t.Fatal(err)
	}
	mustSoftDelete(t, s, clock, ada)
	for field, identity := range map[string]store.Identity{
		"user_name": {UserName: adaIdentity.UserName},
		"email":     {Email: adaIdentity.Email},
	} {
		_, err := s.CreateUser(ctx, store.NewUser{Name: "Copy", Identity: identity}, nil)
		var taken store.Taken
		if !errors.As(err, &taken) || taken.Field != field {
			t.Fatalf("a create with a deleted user's %s: %v, want Taken{%s}", field, err, field)
		}
	}
	if _, err := s.UndeleteUser(ctx, ada.ID, nil); err != nil {
		t.Fatalf("an undelete, with every value still held: %v", err)
	}
	if err := s.PurgeUser(ctx, ada.ID, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateUser(ctx, store.NewUser{Name: "Copy", Identity: store.Identity{UserName: adaIdentity.UserName, Email: adaIdentity.Email}}, nil); err != nil {
		t.Fatalf("a create with a purged user's values: %v, want them free", err)
	}
}
