// Conformance cases for batches of users (AIP-231, 233, 235): order, all or nothing, and one change
// in the log per user, in the batch's order.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"usersd/store"
)

// wantItemError checks that err fails a batch at index with what is.
func wantItemError(t *testing.T, what string, err error, index int, is error) {
	t.Helper()
	var item store.ItemError
	if !errors.As(err, &item) || item.Index != index || !errors.Is(err, is) {
		t.Fatalf("%s: %v; want the item error of index %d, %v", what, err, index, is)
	}
}

// wantUnchanged checks that the store still holds users users and the log ends at latest.
func wantUnchanged(t *testing.T, s store.Store, what string, users int64, latest int64) {
	t.Helper()
	if total := mustList(t, s, store.UserQuery{Limit: 1, ShowDeleted: true}).Total; total != users {
		t.Errorf("after %s: %d users, want %d", what, total, users)
	}
	if events := readEvents(t, s, latest, 100); len(events) != 0 {
		t.Errorf("after %s: the log holds %v, want nothing new", what, mapEvents(events))
	}
}

// latestEvent is the sequence of the newest change in the log.
func latestEvent(t *testing.T, s store.Store) int64 {
	t.Helper()
	page, err := s.UserEvents(context.Background(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	return page.Latest
}

func testBatchCreate(t *testing.T, s store.Store) {
	ctx := context.Background()
	mustCreate(t, s, "before the batch", "")
	latest := latestEvent(t, s)
	batch := []store.NewUser{
		{Name: "first", Role: "admin", Identity: store.Identity{UserName: "first", Email: "first@example.com", Labels: map[string]string{"team": "a"}}},
		{Name: "second", Identity: store.Identity{ExternalID: "ext-2", Inactive: true}},
		{Name: "third", Role: "member"},
	}
	created, err := s.CreateUsers(ctx, batch, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(created) != len(batch) {
		t.Fatalf("created %d users, want %d", len(created), len(batch))
	}
	for i, u := range created {
		if u.Name != batch[i].Name || u.Role != batch[i].Role || u.UserName != batch[i].UserName || u.Email != batch[i].Email ||
			u.ExternalID != batch[i].ExternalID || u.Inactive != batch[i].Inactive || len(u.Labels) != len(batch[i].Labels) || u.Version != 1 {
			t.Errorf("created user %d: %+v, want the fields of %+v at version 1", i, u, batch[i])
		}
		if i > 0 && u.ID <= created[i-1].ID {
			t.Errorf("created user %d has id %d after %d; want growing ids in the batch's order", i, u.ID, created[i-1].ID)
		}
		got, err := s.GetUser(ctx, u.ID)
		if err != nil || !sameUser(got, u) || !reflect.DeepEqual(got.Identity, u.Identity) {
			t.Errorf("read back user %d: %+v, %v; want %+v", u.ID, got, err, u)
		}
	}
	events := readEvents(t, s, latest, 100)
	if len(events) != len(batch) {
		t.Fatalf("the batch left %v in the log, want %d creates", mapEvents(events), len(batch))
	}
	for i, e := range events {
		if e.Kind != store.EventCreated || e.User.ID != created[i].ID || e.User.Name != batch[i].Name {
			t.Errorf("change %d: %s, want the create of %q", i, describeEvent(e), batch[i].Name)
		}
	}
}

func testBatchCreateIsAllOrNothing(t *testing.T, s store.Store, clock *Clock) {
	ctx := context.Background()
	held, err := s.CreateUser(ctx, store.NewUser{Name: "holder", Identity: store.Identity{Email: "taken@example.com", UserName: "holder"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	gone, err := s.CreateUser(ctx, store.NewUser{Name: "gone", Identity: store.Identity{ExternalID: "kept-by-the-deleted"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	mustSoftDelete(t, s, clock, gone)
	latest := latestEvent(t, s)
	users := int64(2)

	// A clash with a stored user, compared ignoring case, fails the whole batch at its index.
	_, err = s.CreateUsers(ctx, []store.NewUser{{Name: "a"}, {Name: "b"}, {Name: "c", Identity: store.Identity{Email: "TAKEN@example.com"}}}, nil)
	wantItemError(t, "a batch whose third user's email is taken", err, 2, store.Taken{Field: "email"})
	wantUnchanged(t, s, "a batch that clashed with a stored user", users, latest)

	// A deleted user still holds its values.
	_, err = s.CreateUsers(ctx, []store.NewUser{{Name: "a", Identity: store.Identity{ExternalID: "kept-by-the-deleted"}}, {Name: "b"}}, nil)
	wantItemError(t, "a batch whose first user's external id a deleted user holds", err, 0, store.Taken{Field: "external_id"})
	wantUnchanged(t, s, "a batch that clashed with a deleted user", users, latest)

	// A clash within the batch names the later of the two.
	_, err = s.CreateUsers(ctx, []store.NewUser{
		{Name: "a", Identity: store.Identity{UserName: "twin"}}, {Name: "b"}, {Name: "c"}, {Name: "d", Identity: store.Identity{UserName: "Twin"}},
	}, nil)
	wantItemError(t, "a batch whose users one and four share a user name", err, 3, store.Taken{Field: "user_name"})
	wantUnchanged(t, s, "a batch that clashed with itself", users, latest)

	// A clash far into a batch of many statements' worth undoes the statements before it too.
	many := make([]store.NewUser, 1000)
	for i := range many {
		many[i] = store.NewUser{Name: fmt.Sprintf("user %d", i), Identity: store.Identity{Email: fmt.Sprintf("u%d@example.com", i)}}
	}
	many[700].UserName = held.UserName
	_, err = s.CreateUsers(ctx, many, nil)
	wantItemError(t, "a large batch whose user 700 clashes", err, 700, store.Taken{Field: "user_name"})
	wantUnchanged(t, s, "a large batch that clashed", users, latest)

	// Once the clash is gone, the same batch is created whole, in order.
	many[700].UserName = ""
	created, err := s.CreateUsers(ctx, many, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, u := range created {
		if u.Name != many[i].Name || i > 0 && u.ID <= created[i-1].ID {
			t.Fatalf("created user %d: %d %q after %d; want %q with a growing id", i, u.ID, u.Name, created[max(i-1, 0)].ID, many[i].Name)
		}
	}
	if events := readEvents(t, s, latest, 300); len(events) != len(many) || events[999].User.ID != created[999].ID {
		t.Fatalf("the large batch left %d changes, want %d in its order", len(events), len(many))
	}
}

func testBatchCreateIdempotent(t *testing.T, s store.Store) {
	ctx := context.Background()
	keep := func(r store.Reservation) *store.Completion[[]store.User] {
		return &store.Completion[[]store.User]{Reservation: r, Answer: func(users []store.User) (store.Answer, error) {
			return store.Answer{Body: fmt.Appendf(nil, "users %d to %d", users[0].ID, users[len(users)-1].ID)}, nil
		}}
	}
	if _, err := s.CreateUser(ctx, store.NewUser{Name: "holder", Identity: store.Identity{Email: "held@example.com"}}, nil); err != nil {
		t.Fatal(err)
	}
	// A batch that fails keeps no answer: its key is still held by the running request, which
	// abandons it.
	r := mustBegin(t, s, aliceKey, hashA)
	if _, err := s.CreateUsers(ctx, []store.NewUser{{Name: "a"}, {Name: "b", Identity: store.Identity{Email: "held@example.com"}}}, keep(r)); !errors.Is(err, store.ErrAlreadyExists) {
		t.Fatalf("a clashing batch with a key: %v", err)
	}
	wantBeginError(t, s, aliceKey, hashA, store.ErrRequestInProgress)
	if err := s.AbandonRequest(ctx, r); err != nil {
		t.Fatal(err)
	}
	r = mustBegin(t, s, aliceKey, hashA)
	created, err := s.CreateUsers(ctx, []store.NewUser{{Name: "a"}, {Name: "b"}}, keep(r))
	if err != nil {
		t.Fatal(err)
	}
	wantAnswer(t, s, aliceKey, hashA, store.Answer{Body: fmt.Appendf(nil, "users %d to %d", created[0].ID, created[1].ID)})
	if total := mustList(t, s, store.UserQuery{Limit: 1}).Total; total != 3 {
		t.Fatalf("%d users, want 3", total)
	}
}

func testBatchGet(t *testing.T, s store.Store, clock *Clock) {
	ctx := context.Background()
	a, b, c := mustCreate(t, s, "a", ""), mustCreate(t, s, "b", ""), mustCreate(t, s, "c", "")
	got, err := s.BatchGetUsers(ctx, []int32{c.ID, a.ID, c.ID, b.ID})
	if err != nil {
		t.Fatal(err)
	}
	want := []store.User{c, a, c, b}
	if len(got) != len(want) {
		t.Fatalf("read %d users, want %d", len(got), len(want))
	}
	for i := range want {
		if !sameUser(got[i], want[i]) {
			t.Errorf("user %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	// The first missing id in the order asked is named.
	mustSoftDelete(t, s, clock, b)
	for _, ids := range [][]int32{{a.ID, 4242, b.ID}, {a.ID, b.ID, 4242}} {
		var missing store.UserNotFound
		if _, err := s.BatchGetUsers(ctx, ids); !errors.As(err, &missing) || missing.ID != ids[1] {
			t.Errorf("batch get of %v: %v; want user %d not found", ids, err, ids[1])
		}
	}
}

func testBatchDelete(t *testing.T, s store.Store, clock *Clock) {
	ctx := context.Background()
	clock.Freeze()
	var users []store.User
	for i := range 5 {
		users = append(users, mustCreate(t, s, fmt.Sprintf("user %d", i), ""))
	}
	if _, err := s.CreatePost(ctx, users[4].ID, store.NewPost{Title: "goes with its user"}, nil); err != nil {
		t.Fatal(err)
	}
	latest := latestEvent(t, s)

	// One missing user fails the whole batch, naming its index; so does a user given twice.
	for _, c := range []struct {
		ids   []int32
		index int
	}{{[]int32{users[0].ID, 4242, users[1].ID}, 1}, {[]int32{users[0].ID, users[1].ID, users[0].ID}, 2}} {
		_, err := s.SoftDeleteUsers(ctx, c.ids, clock.Now().Add(retention))
		wantItemError(t, fmt.Sprintf("soft delete of %v", c.ids), err, c.index, store.ErrNotFound)
		wantItemError(t, fmt.Sprintf("delete of %v", c.ids), s.DeleteUsers(ctx, c.ids), c.index, store.ErrNotFound)
		wantUnchanged(t, s, fmt.Sprintf("deletes of %v", c.ids), 5, latest)
	}

	// The store keeps microseconds.
	now, purgeAt := clock.Now().Truncate(time.Microsecond), clock.Now().Add(retention).Truncate(time.Microsecond)
	deleted, err := s.SoftDeleteUsers(ctx, []int32{users[2].ID, users[0].ID}, purgeAt)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []store.User{users[2], users[0]} {
		if deleted[i].ID != want.ID || deleted[i].Version != want.Version+1 || !deleted[i].DeleteTime.Equal(now) || !deleted[i].PurgeTime.Equal(purgeAt) {
			t.Errorf("deleted %d: %+v; want user %d deleted now, to be purged at %v", i, deleted[i], want.ID, purgeAt)
		}
		if _, err := s.GetUser(ctx, want.ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("get of soft deleted user %d: %v", want.ID, err)
		}
	}
	// A deleted user is missing to a batch delete too.
	_, err = s.SoftDeleteUsers(ctx, []int32{users[1].ID, users[2].ID}, purgeAt)
	wantItemError(t, "soft delete of a deleted user", err, 1, store.ErrNotFound)

	if err := s.DeleteUsers(ctx, []int32{users[4].ID, users[3].ID}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetUserShowingDeleted(ctx, users[4].ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("user removed at once: %v", err)
	}
	if _, err := s.ListPosts(ctx, users[4].ID, store.PostQuery{Limit: 10}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("posts of a user removed at once: %v", err)
	}
	events := readEvents(t, s, latest, 100)
	want := []int32{users[2].ID, users[0].ID, users[4].ID, users[3].ID}
	if len(events) != len(want) {
		t.Fatalf("the deletes left %v, want %d deletes", mapEvents(events), len(want))
	}
	for i, e := range events {
		if e.Kind != store.EventDeleted || e.User.ID != want[i] {
			t.Errorf("change %d: %s, want the delete of user %d", i, describeEvent(e), want[i])
		}
	}
}
