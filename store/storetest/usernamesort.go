package storetest

import (
	"context"
	"slices"
	"strings"
	"testing"

	"usersd/store"
)

// testListSortByUserName holds store.SortByUserName to its rule: user names compared ignoring case
// (their NameKey), the users without one together, and ties broken by id in the sort's direction;
// offsets and cursors walk the same order, deleted users are left out, and the sort is refused where
// no index serves it (with a role, a name search or another sort key).
func testListSortByUserName(t *testing.T, s store.Store) {
	ctx := context.Background()
	userNames := []string{"bob", "Alice", "", "carol_x", "", "ALAN", "Zed", "carolA", "gone", "alice2"}
	var all []store.User
	for _, userName := range userNames {
		u, err := s.CreateUser(ctx, store.NewUser{Name: "n " + userName, Identity: store.Identity{UserName: userName}}, nil)
		if err != nil {
			t.Fatalf("create %q: %v", userName, err)
		}
		if userName == "gone" {
			if err := s.DeleteUser(ctx, u.ID, nil); err != nil {
				t.Fatal(err)
			}
			continue
		}
		all = append(all, u)
	}
	for _, descending := range []bool{false, true} {
		want := slices.Clone(all)
		slices.SortFunc(want, func(a, b store.User) int {
			c := strings.Compare(store.NameKey(a.UserName), store.NameKey(b.UserName))
			if c == 0 {
				c = compare(a.ID, b.ID)
			}
			if descending {
				return -c
			}
			return c
		})
		q := store.UserQuery{Sort: []store.SortKey{{Field: store.SortByUserName, Descending: descending}}, Limit: 100}
		if got := mustList(t, s, q); !slices.Equal(ids(got.Items), ids(want)) || got.Total != int64(len(want)) {
			t.Fatalf("descending=%v: %v (total %d), want %v", descending, userNamesOf(got.Items), got.Total, userNamesOf(want))
		}
		for _, limit := range []int{1, 2, 3} {
			var byCursor, byOffset []store.User
			q.Limit, q.After = limit, nil
			for page := 0; page <= len(want); page++ {
				got := mustList(t, s, q)
				byCursor = append(byCursor, got.Items...)
				if !got.More {
					break
				}
				q.After = cursorAfter(got.Items[len(got.Items)-1])
			}
			q.After = nil
			for q.Offset = 0; q.Offset < int64(len(want)); q.Offset += int64(limit) {
				byOffset = append(byOffset, mustList(t, s, q).Items...)
			}
			q.Offset = 0
			if !slices.Equal(ids(byCursor), ids(want)) || !slices.Equal(ids(byOffset), ids(want)) {
				t.Fatalf("descending=%v limit %d: by cursor %v, by offset %v, want %v", descending, limit,
					userNamesOf(byCursor), userNamesOf(byOffset), userNamesOf(want))
			}
		}
	}
	byUserName := []store.SortKey{{Field: store.SortByUserName}}
	withName := append([]store.SortKey{{Field: store.SortByName}}, byUserName...)
	for _, q := range []store.UserQuery{{Role: "admin", Sort: byUserName, Limit: 10}, {NamePrefix: "n", Sort: byUserName, Limit: 10}, {Sort: withName, Limit: 10}} {
		if _, err := s.ListUsers(ctx, q); err == nil {
			t.Errorf("a sort by user name with role %q, name search %q and sort %v was served; no index serves it", q.Role, q.NamePrefix, q.Sort)
		}
	}
}

func userNamesOf(users []store.User) []string {
	var out []string
	for _, u := range users {
		out = append(out, u.UserName)
	}
	return out
}
