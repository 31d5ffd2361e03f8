// Conformance cases for lists at scale (docs/API.md#lists-at-scale): the name search and keyset paging.
package storetest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"usersd/store"
)

func testNameSearch(t *testing.T, s store.Store) {
	for _, u := range []struct{ name, role string }{
		{"Ada Lovelace", "admin"}, {"ada byron", "viewer"}, {"ADAM", "admin"}, {"Adé", ""}, {"Bob", "admin"},
		{"Ädam", ""}, {"ſam", ""}, {"Sam", "viewer"}, {"σίσυφος", ""}, {"100% real", ""}, {"100 real", ""},
		{"a_b", ""}, {"ab", ""},
	} {
		mustCreate(t, s, u.name, u.role)
	}
	for _, c := range []struct {
		prefix, role string
		want         []string
	}{
		{"ada", "", []string{"Ada Lovelace", "ada byron", "ADAM"}},
		{"ADA ", "", []string{"Ada Lovelace", "ada byron"}},
		{"ada", "admin", []string{"Ada Lovelace", "ADAM"}},
		{"adé", "", []string{"Adé"}},
		{"ÄD", "", []string{"Ädam"}},
		{"SAM", "", []string{"ſam", "Sam"}}, // the long s folds with s
		{"ΣΊ", "", []string{"σίσυφος"}},
		{"100%", "", []string{"100% real"}}, // no pattern characters: % and _ match themselves
		{"a_", "", []string{"a_b"}},
		{"z", "", nil},
		{"ada", "nobody", nil},
	} {
		page := mustList(t, s, store.UserQuery{NamePrefix: c.prefix, Role: c.role, Limit: 100})
		var got []string
		for _, u := range page.Items {
			got = append(got, u.Name)
		}
		if !slices.Equal(got, c.want) || page.Total != int64(len(c.want)) || page.More {
			t.Errorf("prefix %q role %q: %q, total %d, more %v; want %q, total %d", c.prefix, c.role, got, page.Total, page.More, c.want, len(c.want))
		}
	}
}

func testNameSearchAfterRename(t *testing.T, s store.Store) {
	u := mustCreate(t, s, "Grace", "")
	found := func(prefix string) int64 { return mustList(t, s, store.UserQuery{NamePrefix: prefix, Limit: 10}).Total }
	if found("gr") != 1 {
		t.Fatalf("a new user is not found by its name")
	}
	name := "Hopper"
	if _, err := s.UpdateUser(context.Background(), u.ID, store.UserChanges{Name: &name}, nil); err != nil {
		t.Fatal(err)
	}
	if found("gr") != 0 || found("hOp") != 1 {
		t.Fatalf(`after a rename to "Hopper": "gr" finds %d and "hOp" %d, want 0 and 1`, found("gr"), found("hOp"))
	}
	role := "admin"
	if _, err := s.UpdateUser(context.Background(), u.ID, store.UserChanges{Role: &role}, nil); err != nil {
		t.Fatal(err)
	}
	if found("hop") != 1 {
		t.Fatalf("a role change lost the name's search key")
	}
}

// listOrders are the sorts that the keyset walk tries: every attribute in both directions, and
// combinations whose first attribute has many ties.
var listOrders = []string{"", "id", "-id", "name", "-name", "role", "-role", "createdAt", "-createdAt",
	"role,-name", "-role,createdAt", "-role,-createdAt", "name,-createdAt", "-createdAt,-id", "role,name,createdAt", "-name,role"}

func testKeysetWalksEveryOrder(t *testing.T, s store.Store, clock *Clock) {
	// Few distinct names, roles and creation times, so that every order has ties to break, and a few
	// deleted users, so that ids have gaps.
	clock.Freeze()
	names := []string{"ada", "Ada", "bob", "Bob", "ádám", "carol", "ada"}
	roles := []string{"editor", "", "viewer", "editor"}
	var all []store.User
	for i := range 40 {
		if i%3 == 0 {
			clock.Advance(time.Microsecond)
		}
		all = append(all, mustCreate(t, s, names[i%len(names)], roles[i%len(roles)]))
	}
	for _, gone := range []int{5, 6, 20} {
		if err := s.DeleteUser(context.Background(), all[gone].ID, nil); err != nil {
			t.Fatal(err)
		}
	}
	all = slices.Delete(slices.Delete(all, 20, 21), 5, 7)

	for _, sortExpr := range listOrders {
		keys := sortKeys(sortExpr)
		for _, filter := range []store.UserQuery{{}, {Role: "editor"}, {NamePrefix: "AD"}, {Role: "editor", NamePrefix: "a"}} {
			q := filter
			q.Sort = keys
			t.Run(fmt.Sprintf("sort=%s role=%s namePrefix=%s", sortExpr, q.Role, q.NamePrefix), func(t *testing.T) {
				want := ExpectedList(all, q)
				q.Limit = 1000
				if byOffset := mustList(t, s, q).Items; !slices.Equal(ids(byOffset), ids(want)) {
					t.Fatalf("by offset: %v, want %v", describe(byOffset), describe(want))
				}
				for _, limit := range []int{1, 3, 7} {
					var walked []store.User
					q.Limit, q.After = limit, nil
					for pages := 0; ; pages++ {
						if pages > len(want)+1 {
							t.Fatalf("limit %d: the walk does not end", limit)
						}
						page := mustList(t, s, q)
						if page.Total != int64(len(want)) {
							t.Fatalf("limit %d, page %d: total %d, want %d", limit, pages+1, page.Total, len(want))
						}
						walked = append(walked, page.Items...)
						if !page.More {
							break
						}
						if len(page.Items) != limit {
							t.Fatalf("limit %d, page %d: %d items but more follow", limit, pages+1, len(page.Items))
						}
						q.After = cursorAfter(page.Items[len(page.Items)-1])
					}
					if !slices.Equal(ids(walked), ids(want)) {
						t.Fatalf("limit %d: walked %v, want %v", limit, describe(walked), describe(want))
					}
				}
			})
		}
	}
}

// sortKeys parses a sort expression of the REST form ("role,-name") for the tests.
func sortKeys(expr string) []store.SortKey {
	var keys []store.SortKey
	for term := range strings.SplitSeq(expr, ",") {
		if term != "" {
			keys = append(keys, store.SortKey{Field: store.SortField(strings.TrimPrefix(term, "-")), Descending: strings.HasPrefix(term, "-")})
		}
	}
	return keys
}

// ExpectedList is what q must list of users, computed here from the rules of docs/API.md#lists-at-scale (the model that
// the conformance suite and the collection-query fuzzer hold the backends to): exact role,
// case-insensitive name prefix, the filter (FilterHolds), the sort keys in turn with names and roles compared byte-wise, and
// ties by id ascending.
func ExpectedList(users []store.User, q store.UserQuery) []store.User {
	var out []store.User
	for _, u := range users {
		if (q.Role == "" || u.Role == q.Role) && strings.HasPrefix(store.NameKey(u.Name), store.NameKey(q.NamePrefix)) &&
			(q.Filter == nil || FilterHolds(*q.Filter, u)) {
			out = append(out, u)
		}
	}
	slices.SortFunc(out, func(a, b store.User) int {
		for _, k := range q.Sort {
			var c int
			switch k.Field {
			case store.SortByID:
				c = compare(a.ID, b.ID)
			case store.SortByName:
				c = compare(a.Name, b.Name)
			case store.SortByRole:
				c = compare(a.Role, b.Role)
			case store.SortByCreatedAt:
				c = a.CreatedAt.Compare(b.CreatedAt)
			}
			if k.Descending {
				c = -c
			}
			if c != 0 {
				return c
			}
		}
		return compare(a.ID, b.ID)
	})
	return out
}

func testKeysetAfterWrites(t *testing.T, s store.Store) {
	ctx := context.Background()
	byName := []store.SortKey{{Field: store.SortByName}}
	var users []store.User
	for _, name := range []string{"a", "b", "c", "d", "e"} {
		users = append(users, mustCreate(t, s, name, ""))
	}
	first := mustList(t, s, store.UserQuery{Sort: byName, Limit: 2})
	if !slices.Equal(ids(first.Items), ids(users[:2])) || !first.More {
		t.Fatalf("first page %v, want a and b with more", describe(first.Items))
	}
	// The cursor's own user goes, one user comes in right after it and one before it: the next page
	// starts right after the cursor's position, whatever happened to the rows.
	if err := s.DeleteUser(ctx, users[1].ID, nil); err != nil {
		t.Fatal(err)
	}
	bb := mustCreate(t, s, "bb", "")
	mustCreate(t, s, "aa", "")
	next := mustList(t, s, store.UserQuery{Sort: byName, Limit: 2, After: cursorAfter(first.Items[1])})
	if want := []int32{bb.ID, users[2].ID}; !slices.Equal(ids(next.Items), want) || !next.More || next.Total != 6 {
		t.Fatalf("page after the deleted cursor: %v, total %d, more %v; want bb and c, total 6, more", describe(next.Items), next.Total, next.More)
	}
}

func testPostsKeyset(t *testing.T, s store.Store) {
	ctx := context.Background()
	author := mustCreate(t, s, "author", "")
	neighbour := mustCreate(t, s, "neighbour", "")
	var want []int32
	for i := range 7 {
		p, err := s.CreatePost(ctx, author.ID, store.NewPost{Title: fmt.Sprintf("post %d", i)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, p.ID)
		if _, err := s.CreatePost(ctx, neighbour.ID, store.NewPost{Title: "interleaved"}, nil); err != nil {
			t.Fatal(err)
		}
	}
	var walked []int32
	q := store.PostQuery{Limit: 3}
	for {
		page, err := s.ListPosts(ctx, author.ID, q)
		if err != nil {
			t.Fatal(err)
		}
		if page.Total != 7 {
			t.Fatalf("total %d, want 7", page.Total)
		}
		for _, p := range page.Items {
			walked = append(walked, p.ID)
		}
		if !page.More {
			break
		}
		q.AfterID = page.Items[len(page.Items)-1].ID
	}
	if !slices.Equal(walked, want) {
		t.Fatalf("walked posts %v, want %v", walked, want)
	}
}

// cursorAfter returns the position right after u.
func cursorAfter(u store.User) *store.UserCursor {
	return &store.UserCursor{ID: u.ID, Name: u.Name, Role: u.Role, CreatedAt: u.CreatedAt, UserName: u.UserName}
}
