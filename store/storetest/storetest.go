// Package storetest is the conformance suite for store.Store: every backend runs the same cases, so
// that the service behaves the same on each.
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

// Run runs every case against stores made by open. Each call of open must return a new, empty store
// that reads the time from now; Run closes it.
func Run(t *testing.T, open func(t *testing.T, now func() time.Time) store.Store) {
	cases := []struct {
		name string
		test func(t *testing.T, s store.Store, clock *Clock)
	}{
		{"a created user reads back with version 1 and equal timestamps", ignoreClock(testCreateAndGet)},
		{"a missing user is ErrNotFound for every user operation", ignoreClock(testMissingUser)},
		{"ids are unique, increasing and never reused after a delete", ignoreClock(testIDs)},
		{"an update sets only the fields it names and bumps the version", ignoreClock(testUpdate)},
		{"a delete removes the user and the user's posts", ignoreClock(testDelete)},
		{"the list filters by exact role and counts every match", ignoreClock(testListFilter)},
		{"the list sorts by each attribute with ties broken by id", ignoreClock(testListSort)},
		{"the list pages with offset and limit, empty past the end", ignoreClock(testListPaging)},
		{"posts list by id with paging, only for an existing user", ignoreClock(testPosts)},
		{"concurrent creates all succeed with distinct ids", ignoreClock(testConcurrentCreates)},
		{"concurrent updates of different fields both take effect", ignoreClock(testConcurrentUpdates)},
		{"ping answers on an open store", ignoreClock(testPing)},
		{"totals follow creates, role changes and deletes", ignoreClock(testTotals)},
		{"the name search matches a prefix under simple case folding", ignoreClock(testNameSearch)},
		{"a renamed user is found by the new name only", ignoreClock(testNameSearchAfterRename)},
		{"cursors walk every list exactly as offsets do, ties included", testKeysetWalksEveryOrder},
		{"a cursor page is right after its cursor even when rows around it change", ignoreClock(testKeysetAfterWrites)},
		{"the list sorts by user name ignoring case, by offset and by cursor", ignoreClock(testListSortByUserName)},
		{"posts page by cursor as by offset", ignoreClock(testPostsKeyset)},

		{"a filter compares every field with every operator", testFilterFieldsAndOperators},
		{"a filter matches prefixes, ignoring case where the field does", testFilterPrefixes},
		{"a filter matches suffixes and parts inside, ignoring case where the field does", testFilterParts},
		{"filters nest with AND, OR and NOT", testFilterNesting},
		{"a filter combines with the role, the name search, deleted users, sorts and cursors", testFilterWithTheRestOfTheQuery},
		{"a filter's values are bound, never part of the statement", testFilterValuesAreBound},
		{"a label filter follows every write of the labels", testFilterFollowsLabelChanges},

		{"every identity field is stored as given and read back everywhere", ignoreClock(testIdentityRoundTrip)},
		{"user names and emails are unique ignoring case, external ids exactly", ignoreClock(testIdentityUnique)},
		{"of concurrent creates with one user name exactly one is stored", ignoreClock(testIdentityRace)},
		{"labels merge key by key, up to the limit", ignoreClock(testLabelChanges)},
		{"the log forgets a deleted user's identity", ignoreClock(testDeleteForgetsIdentity)},

		{"a soft deleted user is missing to every read and write, and shown only when asked", testSoftDeleteHidesTheUser},
		{"an undelete restores a deleted user, and only a deleted one", testUndelete},
		{"a purge removes a user, deleted or not, and its posts at once", testPurge},
		{"deleted users are purged at their purge time, in batches", testPurgeExpired},
		{"soft delete, undelete and purge are each one change, and a purge forgets the name", testSoftDeleteEvents},
		{"a deleted user holds its unique values until purged", testDeletedUserHoldsItsUniqueValues},

		{"a batch create stores every user in order, one change each", ignoreClock(testBatchCreate)},
		{"a batch create with one clashing user stores nothing and names it", testBatchCreateIsAllOrNothing},
		{"a batch create keeps its answer in its transaction, and only when it commits", ignoreClock(testBatchCreateIdempotent)},
		{"a batch get answers in the order asked and names the first missing user", testBatchGet},
		{"a batch delete deletes every user in order or none, naming the missing one", testBatchDelete},

		{"a conditional write happens only at a listed version", ignoreClock(testConditionalWrites)},
		{"of concurrent writes conditioned on one version exactly one wins", ignoreClock(testConcurrentConditionalWrites)},
		{"an idempotent create keeps its answer in the create's transaction", ignoreClock(testIdempotentCreate)},
		{"an idempotent post create keeps its answer too", ignoreClock(testIdempotentPost)},
		{"a key is held by its running request until completed or abandoned", ignoreClock(testRunningRequestHoldsItsKey)},
		{"of concurrent requests with one key exactly one takes it", ignoreClock(testConcurrentBeginRequest)},
		{"a request past its lease loses its key and cannot complete", testLeaseTakeover},
		{"answers expire after a day and are swept in batches", testRequestExpiry},

		{"every write of a user is one change in the log, in order, and nothing else is", ignoreClock(testEveryWriteIsOneEvent)},
		{"each change records the actor of its write", ignoreClock(testEachChangeRecordsItsActor)},
		{"the log resumes after any sequence read and refuses one ahead of it", ignoreClock(testEventResume)},
		{"changes older than a day are swept in batches and a resume from before them is refused", testEventSweep},
		{"a reader following the log under concurrent writers misses nothing", ignoreClock(testEventOrderUnderConcurrentWrites)},
		{"a write of a user wakes whoever waits for changes", ignoreClock(testEventNotices)},
	}
	for _, c := range webhookCases {
		cases = append(cases, struct {
			name string
			test func(t *testing.T, s store.Store, clock *Clock)
		}{c.name, func(t *testing.T, s store.Store, clock *Clock) { c.test(t, s, webhooksOf(t, s), clock) }})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clock := &Clock{}
			s := open(t, clock.Now)
			t.Cleanup(func() {
				if err := s.Close(); err != nil {
					t.Errorf("close: %v", err)
				}
			})
			c.test(t, s, clock)
		})
	}
}

// Clock is the system clock moved forward by Advance, so that a test can let a day pass at once, and
// stopped by Freeze, so that a test can make writes at the same instant.
type Clock struct {
	mu     sync.Mutex
	offset time.Duration
	frozen time.Time // zero while the clock runs
}

// Now returns the system time (or the time it was frozen at) plus every Advance so far.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.frozen.IsZero() {
		return c.frozen.Add(c.offset)
	}
	return time.Now().Add(c.offset)
}

// Freeze stops the clock where it is; only Advance moves it from then on.
func (c *Clock) Freeze() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.frozen.IsZero() {
		c.frozen = time.Now()
	}
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
}

func ignoreClock(test func(*testing.T, store.Store)) func(*testing.T, store.Store, *Clock) {
	return func(t *testing.T, s store.Store, _ *Clock) { test(t, s) }
}

func testCreateAndGet(t *testing.T, s store.Store) {
	ctx := context.Background()
	before := time.Now().Add(-time.Second)
	created := mustCreate(t, s, "Ada Lovelace", "admin")
	if created.ID <= 0 || created.Name != "Ada Lovelace" || created.Role != "admin" || created.Version != 1 {
		t.Fatalf("created %+v, want a positive id, the given name and role, version 1", created)
	}
	if !created.CreatedAt.Equal(created.UpdatedAt) || created.CreatedAt.Before(before) || created.CreatedAt.Location() != time.UTC {
		t.Fatalf("created timestamps %v / %v, want equal, recent and UTC", created.CreatedAt, created.UpdatedAt)
	}
	if created.CreatedAt.Nanosecond()%1000 != 0 {
		t.Fatalf("created at %v has sub-microsecond digits no backend can keep", created.CreatedAt)
	}
	got, err := s.GetUser(ctx, created.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !sameUser(got, created) {
		t.Fatalf("read back %+v, want %+v", got, created)
	}
	noRole := mustCreate(t, s, "Grace", "")
	if got, _ := s.GetUser(ctx, noRole.ID); got.Role != "" {
		t.Fatalf("user created without a role reads back with role %q", got.Role)
	}
}

func testMissingUser(t *testing.T, s store.Store) {
	ctx := context.Background()
	const missing = 4242
	name := "x"
	checks := map[string]error{}
	_, checks["GetUser"] = s.GetUser(ctx, missing)
	_, checks["UpdateUser"] = s.UpdateUser(ctx, missing, store.UserChanges{Name: &name}, nil)
	checks["DeleteUser"] = s.DeleteUser(ctx, missing, nil)
	_, checks["ListPosts"] = s.ListPosts(ctx, missing, store.PostQuery{Limit: 10})
	_, checks["CreatePost"] = s.CreatePost(ctx, missing, store.NewPost{Title: "t"}, nil)
	for op, err := range checks {
		if !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s of a missing user: got %v, want ErrNotFound", op, err)
		}
	}
}

func testIDs(t *testing.T, s store.Store) {
	a := mustCreate(t, s, "a", "")
	b := mustCreate(t, s, "b", "")
	if b.ID <= a.ID {
		t.Fatalf("second id %d is not above first id %d", b.ID, a.ID)
	}
	if err := s.DeleteUser(context.Background(), b.ID, nil); err != nil {
		t.Fatal(err)
	}
	c := mustCreate(t, s, "c", "")
	if c.ID <= b.ID {
		t.Fatalf("id %d after deleting %d: ids of deleted users must not be reused", c.ID, b.ID)
	}
}

func testUpdate(t *testing.T, s store.Store) {
	ctx := context.Background()
	u := mustCreate(t, s, "before", "reader")
	time.Sleep(2 * time.Millisecond) // so that updated_at can be seen to move

	newName := "after"
	renamed, err := s.UpdateUser(ctx, u.ID, store.UserChanges{Name: &newName}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if renamed.Name != "after" || renamed.Role != "reader" || renamed.Version != 2 {
		t.Fatalf("after renaming: %+v, want name after, role reader, version 2", renamed)
	}
	if !renamed.CreatedAt.Equal(u.CreatedAt) || !renamed.UpdatedAt.After(u.UpdatedAt) {
		t.Fatalf("after renaming: created %v (was %v), updated %v (was %v)", renamed.CreatedAt, u.CreatedAt, renamed.UpdatedAt, u.UpdatedAt)
	}

	noRole := ""
	cleared, err := s.UpdateUser(ctx, u.ID, store.UserChanges{Role: &noRole}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cleared.Name != "after" || cleared.Role != "" || cleared.Version != 3 {
		t.Fatalf("after clearing the role: %+v, want name after, no role, version 3", cleared)
	}
	got, _ := s.GetUser(ctx, u.ID)
	if !sameUser(got, cleared) {
		t.Fatalf("read back %+v, want %+v", got, cleared)
	}
}

func testDelete(t *testing.T, s store.Store) {
	ctx := context.Background()
	u := mustCreate(t, s, "doomed", "")
	if _, err := s.CreatePost(ctx, u.ID, store.NewPost{Title: "last words"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteUser(ctx, u.ID, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetUser(ctx, u.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("get after delete: %v, want ErrNotFound", err)
	}
	if _, err := s.ListPosts(ctx, u.ID, store.PostQuery{Limit: 10}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("posts after delete: %v, want ErrNotFound", err)
	}
	if err := s.DeleteUser(ctx, u.ID, nil); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second delete: %v, want ErrNotFound", err)
	}
}

func testListFilter(t *testing.T, s store.Store) {
	for i, role := range []string{"admin", "user", "admin", "Admin", "", "admin "} {
		mustCreate(t, s, fmt.Sprintf("u%d", i), role)
	}
	for _, c := range []struct {
		role string
		want int64
	}{{"", 6}, {"admin", 2}, {"Admin", 1}, {"user", 1}, {"nobody", 0}} {
		page := mustList(t, s, store.UserQuery{Role: c.role, Limit: 100})
		if page.Total != c.want || int64(len(page.Items)) != c.want {
			t.Errorf("role %q: %d items, total %d; want %d", c.role, len(page.Items), page.Total, c.want)
		}
		for _, u := range page.Items {
			if c.role != "" && u.Role != c.role {
				t.Errorf("role %q: listed a user with role %q", c.role, u.Role)
			}
		}
	}
}

func testListSort(t *testing.T, s store.Store) {
	// Names chosen so that byte-wise order differs from case-insensitive and locale order.
	seed := []struct{ name, role string }{
		{"b", "user"}, {"B", "admin"}, {"a", "user"}, {"é", ""}, {"Z", "admin"}, {"b", "admin"},
	}
	for _, u := range seed {
		mustCreate(t, s, u.name, u.role)
		time.Sleep(time.Millisecond) // distinct creation times
	}
	all := mustList(t, s, store.UserQuery{Limit: 100}).Items
	for _, c := range []struct {
		name string
		sort []store.SortKey
		less func(a, b store.User) int
	}{
		{"by id", nil, func(a, b store.User) int { return 0 }},
		{"by name", []store.SortKey{{Field: store.SortByName}}, func(a, b store.User) int { return compare(a.Name, b.Name) }},
		{"by name descending", []store.SortKey{{Field: store.SortByName, Descending: true}}, func(a, b store.User) int { return compare(b.Name, a.Name) }},
		{"by role then name descending", []store.SortKey{{Field: store.SortByRole}, {Field: store.SortByName, Descending: true}},
			func(a, b store.User) int {
				if c := compare(a.Role, b.Role); c != 0 {
					return c
				}
				return compare(b.Name, a.Name)
			}},
		{"by creation time descending", []store.SortKey{{Field: store.SortByCreatedAt, Descending: true}},
			func(a, b store.User) int { return b.CreatedAt.Compare(a.CreatedAt) }},
		{"by id descending", []store.SortKey{{Field: store.SortByID, Descending: true}}, func(a, b store.User) int { return compare(b.ID, a.ID) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			want := slices.Clone(all)
			slices.SortStableFunc(want, func(a, b store.User) int {
				if r := c.less(a, b); r != 0 {
					return r
				}
				return compare(a.ID, b.ID)
			})
			got := mustList(t, s, store.UserQuery{Sort: c.sort, Limit: 100}).Items
			if !slices.Equal(ids(got), ids(want)) {
				t.Fatalf("order %v, want %v", describe(got), describe(want))
			}
		})
	}
}

func testListPaging(t *testing.T, s store.Store) {
	for i := range 7 {
		mustCreate(t, s, fmt.Sprintf("user %d", i), "")
	}
	all := ids(mustList(t, s, store.UserQuery{Limit: 100}).Items)
	for _, c := range []struct {
		offset int64
		limit  int
		want   []int32
	}{
		{0, 3, all[0:3]}, {3, 3, all[3:6]}, {6, 3, all[6:7]}, {9, 3, nil}, {1 << 40, 3, nil},
	} {
		page := mustList(t, s, store.UserQuery{Offset: c.offset, Limit: c.limit})
		if !slices.Equal(ids(page.Items), c.want) || page.Total != 7 {
			t.Errorf("offset %d limit %d: ids %v total %d, want %v total 7", c.offset, c.limit, ids(page.Items), page.Total, c.want)
		}
	}
}

func testPosts(t *testing.T, s store.Store) {
	ctx := context.Background()
	author := mustCreate(t, s, "author", "")
	other := mustCreate(t, s, "other", "")
	var want []store.Post
	for i := range 5 {
		p, err := s.CreatePost(ctx, author.ID, store.NewPost{Title: fmt.Sprintf("post %d", i), Body: "body"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if p.UserID != author.ID || p.Title != fmt.Sprintf("post %d", i) || p.Body != "body" || p.ID <= 0 {
			t.Fatalf("created post %+v", p)
		}
		want = append(want, p)
	}
	if _, err := s.CreatePost(ctx, other.ID, store.NewPost{Title: "elsewhere"}, nil); err != nil {
		t.Fatal(err)
	}
	page, err := s.ListPosts(ctx, author.ID, store.PostQuery{Offset: 2, Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if page.Total != 5 || len(page.Items) != 2 || page.Items[0].ID != want[2].ID || page.Items[1].ID != want[3].ID {
		t.Fatalf("page 2 of 2: %+v, want posts %d and %d of 5", page, want[2].ID, want[3].ID)
	}
	if !page.Items[0].CreatedAt.Equal(want[2].CreatedAt) || page.Items[0].Body != "body" {
		t.Fatalf("listed post %+v differs from created %+v", page.Items[0], want[2])
	}
	empty, err := s.ListPosts(ctx, mustCreate(t, s, "silent", "").ID, store.PostQuery{Limit: 10})
	if err != nil || empty.Total != 0 || len(empty.Items) != 0 {
		t.Fatalf("posts of a user with none: %+v, %v", empty, err)
	}
}

func testConcurrentCreates(t *testing.T, s store.Store) {
	const n = 50
	var wg sync.WaitGroup
	results := make([]store.User, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			results[i], errs[i] = s.CreateUser(context.Background(), store.NewUser{Name: fmt.Sprintf("concurrent %d", i)}, nil)
		})
	}
	wg.Wait()
	seen := map[int32]bool{}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("create %d: %v", i, err)
		}
		if seen[results[i].ID] {
			t.Fatalf("id %d handed out twice", results[i].ID)
		}
		seen[results[i].ID] = true
	}
	if total := mustList(t, s, store.UserQuery{Limit: 1}).Total; total != n {
		t.Fatalf("total %d after %d creates", total, n)
	}
}

func testConcurrentUpdates(t *testing.T, s store.Store) {
	ctx := context.Background()
	u := mustCreate(t, s, "original", "original")
	name, role := "new name", "new role"
	var wg sync.WaitGroup
	var nameErr, roleErr error
	wg.Go(func() { _, nameErr = s.UpdateUser(ctx, u.ID, store.UserChanges{Name: &name}, nil) })
	wg.Go(func() { _, roleErr = s.UpdateUser(ctx, u.ID, store.UserChanges{Role: &role}, nil) })
	wg.Wait()
	if err := errors.Join(nameErr, roleErr); err != nil {
		t.Fatal(err)
	}
	got, _ := s.GetUser(ctx, u.ID)
	if got.Name != name || got.Role != role || got.Version != 3 {
		t.Fatalf("after two concurrent updates: %+v, want both fields set and version 3", got)
	}
}

func testPing(t *testing.T, s store.Store) {
	if err := s.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func mustCreate(t *testing.T, s store.Store, name, role string) store.User {
	t.Helper()
	u, err := s.CreateUser(context.Background(), store.NewUser{Name: name, Role: role}, nil)
	if err != nil {
		t.Fatalf("create %q: %v", name, err)
	}
	return u
}

func mustList(t *testing.T, s store.Store, q store.UserQuery) store.Page[store.User] {
	t.Helper()
	page, err := s.ListUsers(context.Background(), q)
	if err != nil {
		t.Fatalf("list %+v: %v", q, err)
	}
	return page
}

func sameUser(a, b store.User) bool {
	return a.ID == b.ID && a.Name == b.Name && a.Role == b.Role && a.Version == b.Version &&
		a.CreatedAt.Equal(b.CreatedAt) && a.UpdatedAt.Equal(b.UpdatedAt) &&
		a.DeleteTime.Equal(b.DeleteTime) && a.PurgeTime.Equal(b.PurgeTime)
}

func compare[T int32 | string](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func ids(users []store.User) []int32 {
	var out []int32
	for _, u := range users {
		out = append(out, u.ID)
	}
	return out
}

func describe(users []store.User) []string {
	var out []string
	for _, u := range users {
		out = append(out, fmt.Sprintf("%d:%s/%s", u.ID, u.Name, u.Role))
	}
	return out
}

// testTotals checks the list's totals after every kind of write that can change them: the totals are
// kept apart from the rows (a count table), so each write must keep them right.
func testTotals(t *testing.T, s store.Store) {
	ctx := context.Background()
	total := func(role string) int64 { return mustList(t, s, store.UserQuery{Role: role, Limit: 1}).Total }
	want := func(all, admins, readers, none int64) {
		t.Helper()
		if got := [4]int64{total(""), total("admin"), total("reader"), total("nobody")}; got != [4]int64{all, admins, readers, none} {
			t.Fatalf("totals (all, admin, reader, nobody) = %v, want %v", got, [4]int64{all, admins, readers, none})
		}
	}
	want(0, 0, 0, 0)
	a := mustCreate(t, s, "a", "admin")
	b := mustCreate(t, s, "b", "admin")
	mustCreate(t, s, "c", "reader")
	want(3, 2, 1, 0)
	reader := "reader"
	if _, err := s.UpdateUser(ctx, b.ID, store.UserChanges{Role: &reader}, nil); err != nil {
		t.Fatal(err)
	}
	want(3, 1, 2, 0)
	name := "renamed"
	if _, err := s.UpdateUser(ctx, b.ID, store.UserChanges{Name: &name}, nil); err != nil { // role untouched
		t.Fatal(err)
	}
	want(3, 1, 2, 0)
	if err := s.DeleteUser(ctx, a.ID, store.IfVersion{99}); !errors.Is(err, store.ErrVersionMismatch) { // refused: no change
		t.Fatalf("delete at a wrong version: %v", err)
	}
	want(3, 1, 2, 0)
	if err := s.DeleteUser(ctx, a.ID, nil); err != nil {
		t.Fatal(err)
	}
	want(2, 0, 2, 0)
	mustCreate(t, s, "d", "admin")
	want(3, 1, 2, 0)
}
