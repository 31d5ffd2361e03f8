package users

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	usersv1 "usersd/gen/users/v1"
	"usersd/store"
)

// Builders of the trees the table expects.
func cmpF(field store.FilterField, cmp store.Comparison, v store.FilterValue) store.Filter {
	return store.Filter{Op: store.FilterCompare, Field: field, Cmp: cmp, Value: v}
}
func labelF(key string, cmp store.Comparison, v string) store.Filter {
	return store.Filter{Op: store.FilterCompare, Field: store.FieldLabel, Key: key, Cmp: cmp, Value: str(v)}
}
func hasF(key string) store.Filter { return store.Filter{Op: store.FilterHasLabel, Key: key} }
func andF(args ...store.Filter) store.Filter {
	return store.Filter{Op: store.FilterAnd, Args: args}
}
func orF(args ...store.Filter) store.Filter { return store.Filter{Op: store.FilterOr, Args: args} }
func notF(arg store.Filter) store.Filter {
	return store.Filter{Op: store.FilterNot, Args: []store.Filter{arg}}
}
func intV(i int64) store.FilterValue { return store.FilterValue{Kind: store.ValueInt, Int: i} }
func str(s string) store.FilterValue { return store.FilterValue{Kind: store.ValueString, String: s} }
func prefixV(s string) store.FilterValue {
	return store.FilterValue{Kind: store.ValueString, String: s, Match: store.MatchPrefix}
}
func boolV(b bool) store.FilterValue { return store.FilterValue{Kind: store.ValueBool, Bool: b} }
func timeV(s string) store.FilterValue {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return store.FilterValue{Kind: store.ValueTime, Time: t.UTC()}
}

func idIs(i int64) store.Filter { return cmpF(store.FieldID, store.CompareEqual, intV(i)) }

func TestFilterAccepted(t *testing.T) {
	for _, c := range []struct {
		filter string
		want   store.Filter
	}{
		// Every operator, on the kinds that take it.
		{`id = 7`, idIs(7)},
		{`id != 7`, cmpF(store.FieldID, store.CompareNotEqual, intV(7))},
		{`id < 7`, cmpF(store.FieldID, store.CompareLess, intV(7))},
		{`id <= 7`, cmpF(store.FieldID, store.CompareLessOrEqual, intV(7))},
		{`id > 7`, cmpF(store.FieldID, store.CompareGreater, intV(7))},
		{`id >= 7`, cmpF(store.FieldID, store.CompareGreaterOrEqual, intV(7))},
		{`id>=7`, cmpF(store.FieldID, store.CompareGreaterOrEqual, intV(7))},
		{`id = -5`, idIs(-5)},
		{`id = 2147483647`, idIs(2147483647)},
		{`id = -2147483648`, idIs(-2147483648)},
		{`id = 0x10`, idIs(16)},
		{`id = 0`, idIs(0)},
		{`id = -0`, idIs(0)},
		{`name = "Ada"`, cmpF(store.FieldName, store.CompareEqual, str("Ada"))},
		{`name < "B"`, cmpF(store.FieldName, store.CompareLess, str("B"))},
		{`role != "admin"`, cmpF(store.FieldRole, store.CompareNotEqual, str("admin"))},
		{`email >= "m"`, cmpF(store.FieldEmail, store.CompareGreaterOrEqual, str("m"))},
		{`name = ""`, cmpF(store.FieldName, store.CompareEqual, str(""))},
		{`name = 'Ada'`, cmpF(store.FieldName, store.CompareEqual, str("Ada"))},
		// Proto and JSON names.
		{`user_name = "ada"`, cmpF(store.FieldUserName, store.CompareEqual, str("ada"))},
		{`userName = "ada"`, cmpF(store.FieldUserName, store.CompareEqual, str("ada"))},
		{`external_id = "x1"`, cmpF(store.FieldExternalID, store.CompareEqual, str("x1"))},
		{`externalId = "x1"`, cmpF(store.FieldExternalID, store.CompareEqual, str("x1"))},
		{`created_at > "2026-01-01T00:00:00Z"`, cmpF(store.FieldCreatedAt, store.CompareGreater, timeV("2026-01-01T00:00:00Z"))},
		{`createdAt <= "2026-01-01T02:00:00+02:00"`, cmpF(store.FieldCreatedAt, store.CompareLessOrEqual, timeV("2026-01-01T00:00:00Z"))},
		{`updated_at < "2026-01-01T00:00:00.123456Z"`, cmpF(store.FieldUpdatedAt, store.CompareLess, timeV("2026-01-01T00:00:00.123456Z"))},
		{`updatedAt != "2026-01-01T00:00:00Z"`, cmpF(store.FieldUpdatedAt, store.CompareNotEqual, timeV("2026-01-01T00:00:00Z"))},
		// Booleans.
		{`active = true`, cmpF(store.FieldActive, store.CompareEqual, boolV(true))},
		{`active != false`, cmpF(store.FieldActive, store.CompareNotEqual, boolV(false))},
		// Escapes: the store gets the text they stand for.
		{`name = "say \"hi\""`, cmpF(store.FieldName, store.CompareEqual, str(`say "hi"`))},
		{`name = "back\\slash"`, cmpF(store.FieldName, store.CompareEqual, str(`back\slash`))},
		{`name = "Zoë"`, cmpF(store.FieldName, store.CompareEqual, str("Zoë"))},
		{`name = "a b AND c"`, cmpF(store.FieldName, store.CompareEqual, str("a b AND c"))},
		// Prefixes, on every string field that takes one.
		{`name = "Ad*"`, cmpF(store.FieldName, store.CompareEqual, prefixV("Ad"))},
		{`role = "ad*"`, cmpF(store.FieldRole, store.CompareEqual, prefixV("ad"))},
		{`user_name = "AD*"`, cmpF(store.FieldUserName, store.CompareEqual, prefixV("AD"))},
		{`email = "ada@*"`, cmpF(store.FieldEmail, store.CompareEqual, prefixV("ada@"))},
		{`externalId = "x-*"`, cmpF(store.FieldExternalID, store.CompareEqual, prefixV("x-"))},
		{`name = "*"`, cmpF(store.FieldName, store.CompareEqual, prefixV(""))},
		{`name = "a*b"`, cmpF(store.FieldName, store.CompareEqual, str("a*b"))},
		// Labels: has and compare.
		{`labels:team`, hasF("team")},
		{`labels:"team"`, hasF("team")},
		{`labels:app.kubernetes.io`, hasF("app.kubernetes.io")},
		{`labels.team:*`, hasF("team")},
		{`labels.team = "core"`, labelF("team", store.CompareEqual, "core")},
		{`labels.team != "core"`, labelF("team", store.CompareNotEqual, "core")},
		{`labels.a.b = "c"`, labelF("a.b", store.CompareEqual, "c")},
		{`labels."cost-center" = "42"`, labelF("cost-center", store.CompareEqual, "42")},
		// Precedence: OR binds tighter than AND (AIP-160).
		{`id = 1 AND id = 2 OR id = 3`, andF(idIs(1), orF(idIs(2), idIs(3)))},
		{`id = 1 OR id = 2 AND id = 3`, andF(orF(idIs(1), idIs(2)), idIs(3))},
		{`(id = 1 AND id = 2) OR id = 3`, orF(andF(idIs(1), idIs(2)), idIs(3))},
		{`id = 1 AND (id = 2 AND id = 3)`, andF(idIs(1), idIs(2), idIs(3))},
		{`id = 1 AND id = 2 AND id = 3`, andF(idIs(1), idIs(2), idIs(3))},
		{`id = 1 OR id = 2 OR id = 3`, orF(idIs(1), idIs(2), idIs(3))},
		{`((id = 1))`, idIs(1)},
		{"  id = 1\n AND\tid = 2 ", andF(idIs(1), idIs(2))},
		// NOT and - are the same.
		{`NOT id = 1`, notF(idIs(1))},
		{`-id = 1`, notF(idIs(1))},
		{`NOT (id = 1 OR id = 2)`, notF(orF(idIs(1), idIs(2)))},
		{`-(id = 1 OR id = 2)`, notF(orF(idIs(1), idIs(2)))},
		{`NOT labels:team`, notF(hasF("team"))},
		{`id = 1 AND NOT id = 2`, andF(idIs(1), notF(idIs(2)))},
		{`NOT (NOT id = 1)`, notF(notF(idIs(1)))},
		// All together.
		{`labels:team AND (role = "admin" OR name = "A*") AND -active = false AND created_at >= "2026-01-01T00:00:00Z"`,
			andF(hasF("team"),
				orF(cmpF(store.FieldRole, store.CompareEqual, str("admin")), cmpF(store.FieldName, store.CompareEqual, prefixV("A"))),
				notF(cmpF(store.FieldActive, store.CompareEqual, boolV(false))),
				cmpF(store.FieldCreatedAt, store.CompareGreaterOrEqual, timeV("2026-01-01T00:00:00Z")))},
		// At the limits.
		{strings.Repeat("id = 1 AND ", maxFilterComparisons-1) + "id = 1", andF(repeat(idIs(1), maxFilterComparisons)...)},
		{strings.Repeat("NOT (", maxFilterNesting) + "id = 1" + strings.Repeat(")", maxFilterNesting), nots(maxFilterNesting, idIs(1))},
	} {
		got, err := parseFilter(c.filter)
		if err != nil {
			t.Errorf("parseFilter(%q): %v", c.filter, err)
			continue
		}
		if !reflect.DeepEqual(*got, c.want) {
			t.Errorf("parseFilter(%q)\n got %+v\nwant %+v", c.filter, *got, c.want)
		}
		if err := wellFormed(*got); err != nil {
			t.Errorf("parseFilter(%q): %v", c.filter, err)
		}
	}
}

func repeat(f store.Filter, n int) []store.Filter {
	fs := make([]store.Filter, n)
	for i := range fs {
		fs[i] = f
	}
	return fs
}

func nots(n int, f store.Filter) store.Filter {
	for range n {
		f = notF(f)
	}
	return f
}

func TestNoFilterIsNil(t *testing.T) {
	for _, text := range []string{"", " ", "\t\n"} {
		if f, err := parseFilter(text); f != nil || err != nil {
			t.Errorf("parseFilter(%q) = %+v, %v; want nil, nil", text, f, err)
		}
	}
}

func TestFilterRefused(t *testing.T) {
	for _, c := range []struct {
		filter string
		words  string // in the error's message
	}{
		{`nmae = "Ada"`, `column 1: unknown field "nmae"`},
		{`id = 1 AND colour = "red"`, `column 12: unknown field "colour"`},
		{`Name = "Ada"`, `unknown field "Name"`},
		{`labels = "x"`, `a label compares as labels.KEY`},
		{`"name" = "Ada"`, `the string "name" is not a field`},
		{`name`, `the word "name" is not a comparison`},
		{`"Ada"`, `the string "Ada" is not a comparison`},
		{`foo(1)`, `unknown function "foo"`},
		{`FUZZY()`, `write AND or OR (in capitals)`},
		// Literals of the wrong type.
		{`name = 5`, `column 8: name compares with a string in double quotes, not the integer 5`},
		{`name = Ada`, `not the word "Ada"`},
		{`id = "5"`, `id compares with an integer, not the string "5"`},
		{`id = 1.5`, `not the number 1.5`},
		{`active = "true"`, `active compares with true or false, not the string "true"`},
		{`active = 1`, `active compares with true or false`},
		{`active = TRUE`, `not the word "TRUE"`},
		{`created_at > 5`, `created_at compares with an RFC 3339 time in quotes`},
		{`created_at > timestamp("2026-01-01T00:00:00Z")`, `not a condition or function (timestamp)`},
		{`labels.team = 5`, `labels.team compares with a string`},
		{`name = (role = "a")`, `name compares with a string`},
		// Operators a field does not take.
		{`active < true`, `active compares only with = and !=`},
		{`labels.team > "a"`, `labels.team compares only with = and !=`},
		{`name:"Ada"`, `":" (has) serves only labels:KEY and labels.KEY:*`},
		{`labels.team:"core"`, `":" (has) serves only`},
		{`labels:5`, `":" (has) serves only`},
		// Prefixes.
		{`id = "1*"`, `id compares with an integer, not the string "1*"`},
		{`created_at = "2026*"`, `not an RFC 3339 time`},
		{`name != "Ad*"`, `column 9: the prefix "Ad*" compares only with =`},
		{`name < "Ad*"`, `the prefix "Ad*" compares only with =`},
		{`labels.team = "co*"`, `labels.team takes no prefix`},
		// Label keys out of syntax.
		{`labels.Team = "x"`, `the label key "Team" must be 1 to 63 characters`},
		{`labels:Team`, `the label key "Team" must be`},
		{`labels."9lives":*`, `the label key "9lives" must be`},
		{`labels."" = "x"`, `the label key "" must be`},
		{`labels.` + strings.Repeat("k", 64) + ` = "x"`, `must be 1 to 63 characters`},
		{`labels:*`, `the label key "*" must be`},
		// Strings no stored value holds.
		{`name = "a\x00b"`, `must be UTF-8 text without control characters`},
		{"name = \"a\tb\"", `must be UTF-8 text without control characters`},
		// Bad timestamps.
		{`created_at > "2026-13-01T00:00:00Z"`, `"2026-13-01T00:00:00Z" is not an RFC 3339 time`},
		{`created_at > "2026-01-01"`, `"2026-01-01" is not an RFC 3339 time`},
		{`updated_at < "yesterday"`, `"yesterday" is not an RFC 3339 time`},
		// Ids out of int32.
		{`id = 2147483648`, `id 2147483648 is out of range`},
		{`id > -2147483649`, `id -2147483649 is out of range`},
		{`id = 99999999999999999999`, `column 6 (near "99999999999999999999"): not valid AIP-160`},
		// Syntax.
		{`(id = 1`, `column 8 (at the end): not valid AIP-160: expected )`},
		{`id = 1)`, `column 7 (near ")"): not valid AIP-160`},
		{`((id = 1) AND (id = 2)`, `expected )`},
		{`id = `, `the filter ends too early`},
		{`id = 1 AND`, `not valid AIP-160`},
		{`name = "Ada`, `unterminated string`},
		{`name = "a\qb"`, `unable to unescape string`},
		{`id = 1 id = 2`, `column 8: write AND or OR (in capitals) between two conditions`},
		{`id = 1 and id = 2`, `write AND or OR (in capitals)`},
		{`id = 010`, `column 6: write the id without leading zeros`},
		{`id = -07`, `without leading zeros`},
		{`id == 1`, `not valid AIP-160`},
		{`NOT(id = 1)`, `not valid AIP-160`},
		{"id = 1 AND name = \"\xff\"", `invalid UTF-8`},
		{`AND((id = 1))`, `AND takes two conditions`},
		{`NOT((id = 1), (id = 2))`, `NOT takes one condition`},
		// Limits.
		{`name = "` + strings.Repeat("a", maxFilterBytes) + `"`, `filter is 2009 bytes long; at most 2000 are allowed`},
		{strings.Repeat("id = 1 AND ", maxFilterComparisons) + "id = 1", `filter has more than 32 comparisons`},
		{strings.Repeat("labels:a OR ", maxFilterComparisons) + "labels:a", `filter has more than 32 comparisons`},
		{strings.Repeat("NOT (", maxFilterNesting+1) + "id = 1" + strings.Repeat(")", maxFilterNesting+1), `filter nests more than 8 levels`},
		{nestAndOr(maxFilterNesting + 1), `filter nests more than 8 levels`},
	} {
		f, err := parseFilter(c.filter)
		if err == nil {
			t.Errorf("parseFilter(%q) = %+v, want an error with %q", c.filter, *f, c.words)
			continue
		}
		wantCode(t, c.filter, err, connect.CodeInvalidArgument, ReasonInvalidField)
		var e *Error
		if errors.As(err, &e); e.Field() != "filter" || !strings.HasPrefix(e.Error(), "filter") || !strings.Contains(e.Error(), c.words) {
			t.Errorf("parseFilter(%q): field %q, %q; want the field filter and %q", c.filter, e.Field(), e.Error(), c.words)
		}
	}
}

// nestAndOr nests n levels alternating AND and OR, which no flattening undoes.
func nestAndOr(n int) string {
	f := "id = 1"
	for i := range n {
		op := " AND "
		if i%2 == 1 {
			op = " OR "
		}
		f = "(" + f + op + "id = 2)"
	}
	return f
}

func TestFilterNestingIsCountedAfterFlattening(t *testing.T) {
	if _, err := parseFilter(nestAndOr(maxFilterNesting)); err != nil {
		t.Errorf("%d levels: %v", maxFilterNesting, err)
	}
	// Parentheses around a chain of one operator add no level.
	if _, err := parseFilter(strings.Repeat("(id = 1 AND ", 20) + "id = 1" + strings.Repeat(")", 20)); err != nil {
		t.Errorf("a chain of ANDs in parentheses: %v", err)
	}
}

func TestAPageTokenIsBoundToItsFilter(t *testing.T) {
	sort := []store.SortKey{{Field: store.SortByID}}
	binding := usersBinding("", "", `role = "admin"`, false, sort, 20)
	token := userPageToken(binding, sort, store.User{ID: 7})
	if c, err := userCursor(token, binding, sort); err != nil || c.ID != 7 {
		t.Fatalf("the token's own filter: %+v, %v", c, err)
	}
	for name, other := range map[string]string{
		"another filter":        usersBinding("", "", `role = "guest"`, false, sort, 20),
		"the same, spelt apart": usersBinding("", "", `role="admin"`, false, sort, 20),
		"no filter":             usersBinding("", "", "", false, sort, 20),
	} {
		_, err := userCursor(token, other, sort)
		wantCode(t, name, err, connect.CodeInvalidArgument)
	}
	// Without a filter, the binding is what it was before filters: the tokens out there stay valid.
	if got, want := usersBinding("admin", "ad", "", true, sort, 20), queryBinding("users", "admin", "ad", "20", "deleted", "id", "false"); got != want {
		t.Errorf("the binding of an unfiltered list changed: %s, was %s", got, want)
	}
}

func TestListUsersRefusesABadFilterAndATokenOfAnotherFilter(t *testing.T) {
	s, _ := newSQLiteService(t)
	_, err := s.ListUsers(context.Background(), &usersv1.ListUsersRequest{Filter: `colour = "red"`})
	wantCode(t, "an unknown field", err, connect.CodeInvalidArgument, ReasonInvalidField)
	var e *Error
	if errors.As(err, &e); e.Field() != "filter" {
		t.Errorf("the error names %q, want filter", e.Field())
	}
	sort := []store.SortKey{{Field: store.SortByID}}
	token := userPageToken(usersBinding("", "", `role = "admin"`, false, sort, 20), sort, store.User{ID: 7})
	_, err = s.ListUsers(context.Background(), &usersv1.ListUsersRequest{Filter: `role = "guest"`, PageToken: token})
	wantCode(t, "a token of another filter", err, connect.CodeInvalidArgument, ReasonInvalidField)
	if errors.As(err, &e); e.Field() != "page_token" {
		t.Errorf("the error names %q, want page_token", e.Field())
	}
}
