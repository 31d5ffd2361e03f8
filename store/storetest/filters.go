// Conformance cases for the filter of lists (store.Filter): every field and operator, prefixes,
// identities ignoring case, labels, nesting, and the filter beside the other parts of a query.
package storetest

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"usersd/store"
)

// FilterHolds reports whether f holds for u, by the rules of store.Filter: the model that the
// conformance suite holds the backends' filters to.
func FilterHolds(f store.Filter, u store.User) bool {
	switch f.Op {
	case store.FilterAnd:
		for _, arg := range f.Args {
			if !FilterHolds(arg, u) {
				return false
			}
		}
		return true
	case store.FilterOr:
		return slices.ContainsFunc(f.Args, func(arg store.Filter) bool { return FilterHolds(arg, u) })
	case store.FilterNot:
		return !FilterHolds(f.Args[0], u)
	case store.FilterHasLabel:
		_, ok := u.Labels[f.Key]
		return ok
	}
	v := f.Value
	var c int
	switch f.Field {
	case store.FieldID:
		c = cmp.Compare(int64(u.ID), v.Int)
	case store.FieldActive:
		c = cmp.Compare(boolInt(!u.Inactive), boolInt(v.Bool))
	case store.FieldCreatedAt:
		c = u.CreatedAt.Compare(v.Time)
	case store.FieldUpdatedAt:
		c = u.UpdatedAt.Compare(v.Time)
	case store.FieldLabel:
		label, ok := u.Labels[f.Key]
		if !ok {
			return false // a user without the label matches neither = nor !=
		}
		c = strings.Compare(label, v.String)
	default:
		have, want := map[store.FilterField]string{
			store.FieldName: u.Name, store.FieldRole: u.Role, store.FieldExternalID: u.ExternalID,
			store.FieldGivenName: u.GivenName, store.FieldFamilyName: u.FamilyName,
			store.FieldUserName: store.NameKey(u.UserName), store.FieldEmail: store.NameKey(u.Email),
		}[f.Field], v.String
		if f.Field == store.FieldUserName || f.Field == store.FieldEmail {
			want = store.NameKey(want)
		}
		switch v.Match {
		case store.MatchPrefix:
			return strings.HasPrefix(have, want)
		case store.MatchSuffix: // an identity field that is empty is absent: no part matches it
			return strings.HasSuffix(have, want) && (have != "" || !identityField(f.Field))
		case store.MatchInside:
			return strings.Contains(have, want) && (have != "" || !identityField(f.Field))
		}
		c = strings.Compare(have, want)
	}
	switch f.Cmp {
	case store.CompareEqual:
		return c == 0
	case store.CompareNotEqual:
		return c != 0
	case store.CompareLess:
		return c < 0
	case store.CompareLessOrEqual:
		return c <= 0
	case store.CompareGreater:
		return c > 0
	default:
		return c >= 0
	}
}

// identityField reports whether f is one of the identity fields whose "" means none.
func identityField(f store.FilterField) bool {
	return f == store.FieldUserName || f == store.FieldEmail || f == store.FieldExternalID
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// The filters of the cases, built as the rules build them.

func is(field store.FilterField, c store.Comparison, v store.FilterValue) store.Filter {
	return store.Filter{Op: store.FilterCompare, Field: field, Cmp: c, Value: v}
}
func label(key string, c store.Comparison, v string) store.Filter {
	return store.Filter{Op: store.FilterCompare, Field: store.FieldLabel, Key: key, Cmp: c, Value: text(v)}
}
func hasLabel(key string) store.Filter { return store.Filter{Op: store.FilterHasLabel, Key: key} }
func and(args ...store.Filter) store.Filter {
	return store.Filter{Op: store.FilterAnd, Args: args}
}
func or(args ...store.Filter) store.Filter { return store.Filter{Op: store.FilterOr, Args: args} }
func not(arg store.Filter) store.Filter {
	return store.Filter{Op: store.FilterNot, Args: []store.Filter{arg}}
}
func text(s string) store.FilterValue { return store.FilterValue{Kind: store.ValueString, String: s} }
func prefix(s string) store.FilterValue {
	return store.FilterValue{Kind: store.ValueString, String: s, Match: store.MatchPrefix}
}
func integer(i int64) store.FilterValue { return store.FilterValue{Kind: store.ValueInt, Int: i} }
func boolean(b bool) store.FilterValue  { return store.FilterValue{Kind: store.ValueBool, Bool: b} }
func at(t time.Time) store.FilterValue  { return store.FilterValue{Kind: store.ValueTime, Time: t} }

var comparisons = []store.Comparison{store.CompareEqual, store.CompareNotEqual, store.CompareLess,
	store.CompareLessOrEqual, store.CompareGreater, store.CompareGreaterOrEqual}

// describeFilter is f in the filter's own syntax, near enough to read a failure by.
func describeFilter(f store.Filter) string {
	switch f.Op {
	case store.FilterAnd, store.FilterOr:
		var parts []string
		for _, a := range f.Args {
			parts = append(parts, describeFilter(a))
		}
		return "(" + strings.Join(parts, map[bool]string{true: " AND ", false: " OR "}[f.Op == store.FilterAnd]) + ")"
	case store.FilterNot:
		return "NOT " + describeFilter(f.Args[0])
	case store.FilterHasLabel:
		return "labels:" + f.Key
	}
	field := map[store.FilterField]string{store.FieldID: "id", store.FieldName: "name", store.FieldRole: "role",
		store.FieldUserName: "user_name", store.FieldEmail: "email", store.FieldExternalID: "external_id",
		store.FieldActive: "active", store.FieldCreatedAt: "created_at", store.FieldUpdatedAt: "updated_at",
		store.FieldLabel: "labels." + f.Key, store.FieldGivenName: "given_name", store.FieldFamilyName: "family_name"}[f.Field]
	op := []string{"", "=", "!=", "<", "<=", ">", ">="}[f.Cmp]
	v := f.Value
	value := map[store.ValueKind]string{store.ValueInt: fmt.Sprint(v.Int), store.ValueString: fmt.Sprintf([]string{"%q", "%q*", "*%q", "*%q*"}[v.Match], v.String),
		store.ValueBool: fmt.Sprint(v.Bool), store.ValueTime: v.Time.Format(time.RFC3339Nano)}[v.Kind]
	return field + " " + op + " " + value
}

// filterUsers creates the users of the filter cases: every field set on some and not on others, names
// and identities that differ only in case, labels that some users lack, quotes and SQL in values,
// and a deleted user. Each is created a microsecond after the one before.
func filterUsers(t *testing.T, s store.Store, clock *Clock) (live, deleted []store.User) {
	ctx := context.Background()
	clock.Freeze()
	for _, nu := range []store.NewUser{
		{Name: "Ada", Role: "admin", Identity: store.Identity{UserName: "Ada.L", Email: "ada@example.com", ExternalID: "E-1",
			GivenName: "Ada", FamilyName: "Lovelace", Labels: map[string]string{"team": "core", "tier": "gold"}}},
		{Name: "bob", Role: "viewer", Identity: store.Identity{UserName: "bob", Email: "BOB@Example.com", ExternalID: "E-2",
			Inactive: true, Labels: map[string]string{"team": "edge"}}},
		{Name: "Carol", Role: ""},
		{Name: "Dan's; DROP TABLE users; --", Role: "editor", Identity: store.Identity{UserName: "o'brien", Email: `"x"@y`, FamilyName: "O'Brien",
			ExternalID: "id'; SELECT 1", Labels: map[string]string{"note": "it's; OR 1=1 --", "team": ""}}},
		{Name: "Ädam", Role: "editor", Identity: store.Identity{UserName: "ÄDAM", Email: "adam@example.org", ExternalID: "E-10",
			Labels: map[string]string{"tier": "silver"}}},
		{Name: "ſam", Role: "viewer", Identity: store.Identity{UserName: "ſam", Email: "sam@example.org", Inactive: true,
			Labels: map[string]string{"team": "Core"}}},
		{Name: "Ada", Role: "viewer", Identity: store.Identity{UserName: "ada2", Email: "ada2@example.com", ExternalID: "e-1"}},
		{Name: "100% real_", Role: "admin", Identity: store.Identity{UserName: "a_b%", Labels: map[string]string{"team": "core"}}},
	} {
		clock.Advance(time.Microsecond)
		u, err := s.CreateUser(ctx, nu, nil)
		if err != nil {
			t.Fatalf("create %q: %v", nu.Name, err)
		}
		live = append(live, u)
	}
	// One update, so that updated_at differs from created_at; one user deleted, shown only when asked.
	clock.Advance(time.Second)
	role := "admin"
	updated, err := s.UpdateUser(ctx, live[2].ID, store.UserChanges{Role: &role, LabelChanges: map[string]*string{"tier": &role}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	live[2] = updated
	clock.Advance(time.Microsecond)
	gone, err := s.CreateUser(ctx, store.NewUser{Name: "Eve", Role: "admin", Identity: store.Identity{UserName: "eve",
		Labels: map[string]string{"team": "core"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	deleted = append(deleted, mustSoftDelete(t, s, clock, gone))
	return live, deleted
}

// checkFilter lists q and holds its page and total to the model.
func checkFilter(t *testing.T, s store.Store, users []store.User, q store.UserQuery) []store.User {
	t.Helper()
	want := ExpectedList(users, q)
	q.Limit = 100
	page, err := s.ListUsers(context.Background(), q)
	if err != nil {
		t.Errorf("filter %s: %v", describeFilter(*q.Filter), err)
		return nil
	}
	if !slices.Equal(ids(page.Items), ids(want)) || page.Total != int64(len(want)) || page.More {
		t.Errorf("filter %s (role %q, namePrefix %q, deleted %v): %v, total %d, more %v; want %v, total %d",
			describeFilter(*q.Filter), q.Role, q.NamePrefix, q.ShowDeleted, describe(page.Items), page.Total, page.More, describe(want), len(want))
	}
	return page.Items
}

func testFilterFieldsAndOperators(t *testing.T, s store.Store, clock *Clock) {
	users, _ := filterUsers(t, s, clock)
	mid := users[3]
	var filters []store.Filter
	for _, cmp := range comparisons {
		filters = append(filters,
			is(store.FieldID, cmp, integer(int64(mid.ID))),
			is(store.FieldName, cmp, text("Ada")),
			is(store.FieldRole, cmp, text("editor")),
			is(store.FieldUserName, cmp, text("ADA.l")),
			is(store.FieldEmail, cmp, text("bob@example.COM")),
			is(store.FieldExternalID, cmp, text("E-1")),
			is(store.FieldCreatedAt, cmp, at(mid.CreatedAt)),
			is(store.FieldUpdatedAt, cmp, at(users[2].UpdatedAt)),
			// Between two microseconds: no stored time equals it, and the rest fall on either side.
			is(store.FieldCreatedAt, cmp, at(mid.CreatedAt.Add(500*time.Nanosecond))),
			is(store.FieldCreatedAt, cmp, at(mid.CreatedAt.Add(-500*time.Nanosecond))),
			// Ids no user can have, beyond the column's range.
			is(store.FieldID, cmp, integer(1<<40)),
			is(store.FieldID, cmp, integer(-1<<40)),
			// An empty identity value is a value: the users without one.
			is(store.FieldUserName, cmp, text("")),
			is(store.FieldExternalID, cmp, text("")),
		)
	}
	for _, cmp := range []store.Comparison{store.CompareEqual, store.CompareNotEqual} {
		filters = append(filters,
			is(store.FieldActive, cmp, boolean(false)),
			is(store.FieldActive, cmp, boolean(true)),
			label("team", cmp, "core"),
			label("team", cmp, ""),
			label("nobody", cmp, "core"),
		)
	}
	filters = append(filters, hasLabel("team"), hasLabel("tier"), hasLabel("nobody"))
	for _, f := range filters {
		checkFilter(t, s, users, store.UserQuery{Filter: &f})
	}

	// A few by hand, so that the model is not the only judge.
	for _, c := range []struct {
		f    store.Filter
		want []int
	}{
		{is(store.FieldUserName, store.CompareEqual, text("ada.L")), []int{0}},
		{is(store.FieldEmail, store.CompareEqual, text("bob@EXAMPLE.com")), []int{1}},
		{is(store.FieldUserName, store.CompareEqual, text("SAM")), []int{5}}, // the long s folds with s
		{is(store.FieldActive, store.CompareEqual, boolean(false)), []int{1, 5}},
		{label("team", store.CompareEqual, "core"), []int{0, 7}},
		{label("team", store.CompareNotEqual, "core"), []int{1, 3, 5}}, // not Carol, Ädam, ada2: no team
		{hasLabel("tier"), []int{0, 2, 4}},
		{is(store.FieldExternalID, store.CompareEqual, text("E-1")), []int{0}}, // exact: not e-1
		{is(store.FieldUpdatedAt, store.CompareGreater, at(users[7].CreatedAt)), []int{2}},
	} {
		page := mustList(t, s, store.UserQuery{Filter: &c.f, Limit: 100})
		var want []int32
		for _, i := range c.want {
			want = append(want, users[i].ID)
		}
		if !slices.Equal(ids(page.Items), want) || page.Total != int64(len(want)) {
			t.Errorf("filter %s: %v, total %d; want users %v", describeFilter(c.f), describe(page.Items), page.Total, c.want)
		}
	}
}

// checkFilterByHand checks f against the model (checkFilter) and against want, the indexes in
// users of the users it must find, in order: so that the model is not the only judge.
func checkFilterByHand(t *testing.T, s store.Store, users []store.User, f store.Filter, want []int) {
	t.Helper()
	page := checkFilter(t, s, users, store.UserQuery{Filter: &f})
	var wantIDs []int32
	for _, i := range want {
		wantIDs = append(wantIDs, users[i].ID)
	}
	if !slices.Equal(ids(page), wantIDs) {
		t.Errorf("filter %s: %v; want users %v", describeFilter(f), describe(page), want)
	}
}

func testFilterPrefixes(t *testing.T, s store.Store, clock *Clock) {
	users, _ := filterUsers(t, s, clock)
	for _, c := range []struct {
		f    store.Filter
		want []int
	}{
		{is(store.FieldName, store.CompareEqual, prefix("Ad")), []int{0, 6}}, // exact case: not Ädam
		{is(store.FieldName, store.CompareEqual, prefix("ad")), nil},
		{is(store.FieldName, store.CompareEqual, prefix("100%")), []int{7}}, // % and _ are themselves
		{is(store.FieldName, store.CompareEqual, prefix("100_")), nil},
		{is(store.FieldName, store.CompareEqual, prefix("Dan's;")), []int{3}},
		{is(store.FieldName, store.CompareEqual, prefix("")), []int{0, 1, 2, 3, 4, 5, 6, 7}},
		{is(store.FieldRole, store.CompareEqual, prefix("ad")), []int{0, 2, 7}},
		{is(store.FieldExternalID, store.CompareEqual, prefix("E-1")), []int{0, 4}},
		{is(store.FieldExternalID, store.CompareEqual, prefix("e-")), []int{6}},
		{is(store.FieldUserName, store.CompareEqual, prefix("ad")), []int{0, 6}},
		{is(store.FieldUserName, store.CompareEqual, prefix("äd")), []int{4}},
		{is(store.FieldUserName, store.CompareEqual, prefix("a_")), []int{7}},
		{is(store.FieldUserName, store.CompareEqual, prefix("a%")), nil},
		{is(store.FieldUserName, store.CompareEqual, prefix("S")), []int{5}},
		{is(store.FieldEmail, store.CompareEqual, prefix("ADA")), []int{0, 4, 6}}, // adam@ too
		{is(store.FieldEmail, store.CompareEqual, prefix(`"X"@`)), []int{3}},
		{is(store.FieldEmail, store.CompareEqual, prefix("\U0010FFFF")), nil}, // no successor: the bound is dropped
		{not(is(store.FieldEmail, store.CompareEqual, prefix("ada"))), []int{1, 2, 3, 5, 7}},
	} {
		checkFilterByHand(t, s, users, c.f, c.want)
	}
}

func suffix(s string) store.FilterValue {
	return store.FilterValue{Kind: store.ValueString, String: s, Match: store.MatchSuffix}
}
func inside(s string) store.FilterValue {
	return store.FilterValue{Kind: store.ValueString, String: s, Match: store.MatchInside}
}

// testFilterParts holds the matches of a part of a string that SCIM's ew and co ask for, on every
// string field: ignoring case where the field does, an empty identity field matching none.
func testFilterParts(t *testing.T, s store.Store, clock *Clock) {
	users, _ := filterUsers(t, s, clock)
	fields := []store.FilterField{store.FieldName, store.FieldRole, store.FieldUserName, store.FieldEmail,
		store.FieldExternalID, store.FieldGivenName, store.FieldFamilyName}
	for _, field := range fields {
		for _, part := range []string{"", "a", "AM", "-1", "%", "_", "'", "example.COM", "\U0010FFFF"} {
			for _, v := range []store.FilterValue{suffix(part), inside(part)} {
				f := is(field, store.CompareEqual, v)
				checkFilter(t, s, users, store.UserQuery{Filter: &f})
				n := not(f)
				checkFilter(t, s, users, store.UserQuery{Filter: &n})
			}
		}
	}
	for _, c := range []struct {
		f    store.Filter
		want []int
	}{
		{is(store.FieldEmail, store.CompareEqual, suffix("@EXAMPLE.com")), []int{0, 1, 6}},
		{is(store.FieldEmail, store.CompareEqual, inside("ADA")), []int{0, 4, 6}},
		{is(store.FieldUserName, store.CompareEqual, suffix("")), []int{0, 1, 3, 4, 5, 6, 7}}, // not Carol: none
		{is(store.FieldUserName, store.CompareEqual, suffix("AM")), []int{4, 5}},              // the long s folds with s
		{is(store.FieldExternalID, store.CompareEqual, inside("-1")), []int{0, 4, 6}},
		{is(store.FieldExternalID, store.CompareEqual, inside("e-")), []int{6}}, // exact
		{is(store.FieldName, store.CompareEqual, suffix("am")), []int{4, 5}},
		{is(store.FieldName, store.CompareEqual, inside("%")), []int{7}}, // % and _ are themselves
		{is(store.FieldName, store.CompareEqual, inside("'")), []int{3}},
		{is(store.FieldGivenName, store.CompareEqual, text("Ada")), []int{0}},
		{is(store.FieldFamilyName, store.CompareEqual, inside("Brien")), []int{3}},
		{is(store.FieldGivenName, store.CompareEqual, suffix("")), []int{0, 1, 2, 3, 4, 5, 6, 7}},
		{not(is(store.FieldEmail, store.CompareEqual, inside("example"))), []int{2, 3, 7}}, // none, or not at example
	} {
		checkFilterByHand(t, s, users, c.f, c.want)
	}
}

func testFilterNesting(t *testing.T, s store.Store, clock *Clock) {
	users, deleted := filterUsers(t, s, clock)
	admins := is(store.FieldRole, store.CompareEqual, text("admin"))
	core := label("team", store.CompareEqual, "core")
	inactive := is(store.FieldActive, store.CompareEqual, boolean(false))
	early := is(store.FieldCreatedAt, store.CompareLessOrEqual, at(users[3].CreatedAt))
	for _, f := range []store.Filter{
		and(admins, core),
		or(admins, inactive),
		not(core),
		not(hasLabel("team")),
		not(not(core)),
		and(or(admins, inactive), not(core)),
		or(and(early, hasLabel("team")), and(not(early), not(hasLabel("team")))),
		not(or(admins, and(inactive, label("team", store.CompareNotEqual, "edge")))),
		and(early, admins, core),
		or(is(store.FieldID, store.CompareLess, integer(int64(users[2].ID))), is(store.FieldID, store.CompareGreater, integer(int64(users[5].ID))), core),
	} {
		checkFilter(t, s, users, store.UserQuery{Filter: &f})
		// Deleted users are filtered as the others are, when shown.
		checkFilter(t, s, append(slices.Clone(users), deleted...), store.UserQuery{Filter: &f, ShowDeleted: true})
	}
}

// testFilterWithTheRestOfTheQuery holds a filter beside the role, the name search, deleted users and
// every sort, and walks each with cursors: every match comes once, in order, and the total is
// exact on every page.
func testFilterWithTheRestOfTheQuery(t *testing.T, s store.Store, clock *Clock) {
	users, deleted := filterUsers(t, s, clock)
	for _, f := range []store.Filter{
		hasLabel("team"),
		// A label and a label's value, alone and in an AND, which SQLite's pages in id order read
		// from the label's entries.
		label("team", store.CompareEqual, "core"),
		and(is(store.FieldActive, store.CompareEqual, boolean(true)), label("team", store.CompareEqual, "core"), is(store.FieldID, store.CompareGreater, integer(1))),
		and(hasLabel("tier"), is(store.FieldRole, store.CompareNotEqual, text("editor"))),
		not(is(store.FieldActive, store.CompareEqual, boolean(false))),
		or(is(store.FieldUserName, store.CompareEqual, prefix("a")), label("tier", store.CompareEqual, "gold")),
	} {
		for _, base := range []store.UserQuery{{}, {Role: "admin"}, {NamePrefix: "ad"}, {Role: "viewer", NamePrefix: "A"}, {ShowDeleted: true}} {
			all := users
			if base.ShowDeleted {
				all = append(slices.Clone(users), deleted...)
			}
			for _, sortExpr := range []string{"", "-id", "name", "-name", "role,-createdAt", "-createdAt"} {
				q := base
				q.Filter, q.Sort = &f, sortKeys(sortExpr)
				want := ExpectedList(all, q)
				checkFilter(t, s, all, q)
				var walked []store.User
				q.Limit = 2
				for pages := 0; ; pages++ {
					if pages > len(want)+1 {
						t.Fatalf("filter %s sort %s: the walk does not end", describeFilter(f), sortExpr)
					}
					page := mustList(t, s, q)
					if page.Total != int64(len(want)) {
						t.Fatalf("filter %s sort %s, page %d: total %d, want %d", describeFilter(f), sortExpr, pages+1, page.Total, len(want))
					}
					walked = append(walked, page.Items...)
					if !page.More {
						break
					}
					q.After = cursorAfter(page.Items[len(page.Items)-1])
				}
				if !slices.Equal(ids(walked), ids(want)) {
					t.Errorf("filter %s %+v sort %s: walked %v, want %v", describeFilter(f), base, sortExpr, describe(walked), describe(want))
				}
			}
		}
	}
}

// testFilterValuesAreBound filters on values that would end or change the statement if they were
// written into it: each finds its own user, and nothing else happens.
func testFilterValuesAreBound(t *testing.T, s store.Store, clock *Clock) {
	users, _ := filterUsers(t, s, clock)
	dan := users[3]
	for _, f := range []store.Filter{
		is(store.FieldName, store.CompareEqual, text("Dan's; DROP TABLE users; --")),
		is(store.FieldUserName, store.CompareEqual, text("O'BRIEN")),
		is(store.FieldEmail, store.CompareEqual, text(`"X"@Y`)),
		is(store.FieldExternalID, store.CompareEqual, text("id'; SELECT 1")),
		label("note", store.CompareEqual, "it's; OR 1=1 --"),
		and(is(store.FieldName, store.CompareEqual, prefix("Dan's; DROP")), label("note", store.CompareNotEqual, "' OR ''='")),
	} {
		page := mustList(t, s, store.UserQuery{Filter: &f, Limit: 100})
		if !slices.Equal(ids(page.Items), []int32{dan.ID}) || page.Total != 1 {
			t.Errorf("filter %s: %v, total %d; want only %d", describeFilter(f), describe(page.Items), page.Total, dan.ID)
		}
	}
	for _, f := range []store.Filter{
		is(store.FieldName, store.CompareEqual, text("' OR '1'='1")),
		is(store.FieldRole, store.CompareEqual, text("x' OR role <> 'x")),
		label("team", store.CompareEqual, "core') OR ('1'='1"),
		hasLabel("team') OR ('1'='1"),
		is(store.FieldUserName, store.CompareEqual, prefix("%")),
		is(store.FieldName, store.CompareEqual, text("SELECT * FROM users; DELETE FROM users WHERE 1=1; --")),
	} {
		if page := mustList(t, s, store.UserQuery{Filter: &f, Limit: 100}); len(page.Items) != 0 || page.Total != 0 {
			t.Errorf("filter %s: %v, total %d; want none", describeFilter(f), describe(page.Items), page.Total)
		}
	}
	if page := mustList(t, s, store.UserQuery{Limit: 100}); len(page.Items) != len(users) {
		t.Fatalf("after the filters, %d users are listed, want %d", len(page.Items), len(users))
	}
}

// testFilterFollowsLabelChanges checks that a label filter sees every write of the labels: a
// create, a patch, a replacement, a removal, a soft delete and a purge.
func testFilterFollowsLabelChanges(t *testing.T, s store.Store, clock *Clock) {
	ctx := context.Background()
	count := func(f store.Filter, showDeleted bool) int64 {
		return mustList(t, s, store.UserQuery{Filter: &f, Limit: 1, ShowDeleted: showDeleted}).Total
	}
	gold := label("tier", store.CompareEqual, "gold")
	u, err := s.CreateUser(ctx, store.NewUser{Name: "x", Identity: store.Identity{Labels: map[string]string{"tier": "gold"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	mustCreate(t, s, "unlabelled", "")
	silver := "silver"
	steps := []struct {
		changes        store.UserChanges
		gold, hasTier  int64
		silverOrOthers int64
	}{
		{store.UserChanges{LabelChanges: map[string]*string{"tier": &silver}}, 0, 1, 1},
		{store.UserChanges{Labels: &map[string]string{"tier": "gold", "other": "x"}}, 1, 1, 1},
		{store.UserChanges{LabelChanges: map[string]*string{"tier": nil}}, 0, 0, 1},
		{store.UserChanges{Labels: &map[string]string{}}, 0, 0, 0},
		{store.UserChanges{LabelChanges: map[string]*string{"tier": &silver}}, 0, 1, 1},
	}
	for i, step := range steps {
		if u, err = s.UpdateUser(ctx, u.ID, step.changes, nil); err != nil {
			t.Fatal(err)
		}
		got := [3]int64{count(gold, false), count(hasLabel("tier"), false),
			count(or(label("tier", store.CompareEqual, "silver"), hasLabel("other")), false)}
		if want := [3]int64{step.gold, step.hasTier, step.silverOrOthers}; got != want {
			t.Fatalf("after step %d (labels %v): gold, has tier, silver or other = %v, want %v", i, u.Labels, got, want)
		}
	}
	u = mustSoftDelete(t, s, clock, u)
	if count(hasLabel("tier"), false) != 0 || count(hasLabel("tier"), true) != 1 {
		t.Fatalf("a deleted user's labels: found %d, %d with deleted users; want 0, 1", count(hasLabel("tier"), false), count(hasLabel("tier"), true))
	}
	if err := s.PurgeUser(ctx, u.ID, nil); err != nil {
		t.Fatal(err)
	}
	if count(hasLabel("tier"), true) != 0 {
		t.Fatal("a purged user is still found by its label")
	}
}
