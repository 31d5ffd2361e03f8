package scim

import (
	"fmt"
	"strings"
	"testing"

	"usersd/store"
)

// describe is f in a short form to compare: field op value, with the match of a part.
func describe(f store.Filter) string {
	switch f.Op {
	case store.FilterAnd, store.FilterOr:
		var parts []string
		for _, a := range f.Args {
			parts = append(parts, describe(a))
		}
		return "(" + strings.Join(parts, map[store.FilterOp]string{store.FilterAnd: " AND ", store.FilterOr: " OR "}[f.Op]) + ")"
	case store.FilterNot:
		return "NOT " + describe(f.Args[0])
	}
	field := map[store.FilterField]string{store.FieldID: "id", store.FieldName: "name", store.FieldRole: "role",
		store.FieldUserName: "user_name", store.FieldEmail: "email", store.FieldExternalID: "external_id",
		store.FieldActive: "active", store.FieldCreatedAt: "created_at", store.FieldUpdatedAt: "updated_at",
		store.FieldGivenName: "given_name", store.FieldFamilyName: "family_name"}[f.Field]
	op := []string{"", "=", "!=", "<", "<=", ">", ">="}[f.Cmp]
	v := f.Value
	switch v.Kind {
	case store.ValueInt:
		if v.Int > 1<<31 {
			return map[store.Comparison]string{store.CompareEqual: "FALSE", store.CompareNotEqual: "TRUE"}[f.Cmp]
		}
		return fmt.Sprintf("%s %s %d", field, op, v.Int)
	case store.ValueBool:
		return fmt.Sprintf("%s %s %v", field, op, v.Bool)
	case store.ValueTime:
		return fmt.Sprintf("%s %s %s", field, op, v.Time.Format("2006-01-02T15:04:05Z07:00"))
	}
	return fmt.Sprintf("%s %s %s", field, op, fmt.Sprintf([]string{"%q", "%q*", "*%q", "*%q*"}[v.Match], v.String))
}

// chain is n terms made from format and their index, joined by sep.
func chain(n int, format, sep string) string {
	terms := make([]string, n)
	for i := range terms {
		terms[i] = fmt.Sprintf(format, i)
	}
	return strings.Join(terms, sep)
}

// TestFiltersBecomeTheStoresFilters: each operator, attribute and form of RFC 7644's filters, and
// the forms identity providers send, as the store's typed filter.
func TestFiltersBecomeTheStoresFilters(t *testing.T) {
	for _, c := range []struct{ filter, want string }{
		{`userName eq "Ada@Example.com"`, `user_name = "Ada@Example.com"`},
		{`USERNAME Eq "ada"`, `user_name = "ada"`},
		{`urn:ietf:params:scim:schemas:core:2.0:User:userName eq "ada"`, `user_name = "ada"`},
		{`externalId eq "0a1b"`, `external_id = "0a1b"`},
		{`emails.value eq "ada@example.com"`, `email = "ada@example.com"`},
		{`emails eq "ada@example.com"`, `email = "ada@example.com"`},
		{`emails[type eq "work"].value eq "ada@example.com"`, `(email != "" AND email = "ada@example.com")`},
		{`emails[type eq "work" and primary eq true].value eq "a@b.c"`, `(email != "" AND email = "a@b.c")`},
		{`emails[type eq "home" or type eq "work"].value eq "a@b.c"`, `(email != "" AND (FALSE OR email != "") AND email = "a@b.c")`},
		{`userName eq "x" or emails[type eq "work"].value co "@b.c"`, `(user_name = "x" OR (email != "" AND email = *"@b.c"*))`},
		{`emails[type eq "work" and value co "@example.com"]`, `(email != "" AND email = *"@example.com"*)`},
		{`emails[type eq "home"]`, `(email != "" AND FALSE)`},
		{`emails[primary eq true].value pr`, `email != ""`},
		{`emails[primary eq "True"]`, `email != ""`},
		{`emails[not (type eq "work")]`, `(email != "" AND NOT email != "")`},
		{`emails[value ne "z@z.z"]`, `(email != "" AND email != "z@z.z")`},
		{`meta.lastModified gt "2026-11-27T00:00:00Z"`, `updated_at > 2026-11-27T00:00:00Z`},
		{`meta.created le "2026-11-27T00:00:00+01:00"`, `created_at <= 2026-11-27T00:00:00+01:00`},
		{`id eq "42"`, `id = 42`},
		{`id eq "not-a-number"`, `FALSE`},
		{`id ne "not-a-number"`, `TRUE`},
		{`displayName sw "Ad"`, `name = "Ad"*`},
		{`name.familyName ew "ace"`, `family_name = *"ace"`},
		{`name.givenName pr`, `given_name != ""`},
		{`userName pr`, `user_name != ""`},
		{`displayName pr`, `TRUE`},
		{`active eq false`, `active = false`},
		{`active ne true`, `active != true`},
		{`roles[value eq "admin"]`, `(role != "" AND role = "admin")`},
		{`meta.resourceType eq "User"`, `TRUE`},
		{`userName gt "m"`, `user_name > "m"`},
		{`not (active eq true)`, `NOT active = true`},
		{`userName eq "a" or userName eq "b" and active eq true`, `(user_name = "a" OR (user_name = "b" AND active = true))`},
		{`(userName eq "a" or userName eq "b") and active eq true`, `((user_name = "a" OR user_name = "b") AND active = true)`},
		{`userName eq "a" and externalId eq "b" and active eq true`, `(user_name = "a" AND external_id = "b" AND active = true)`},
		{`userName eq "x].y eq \"z\""`, `user_name = "x].y eq \"z\""`},
		{`userName eq "back\\slash"`, `user_name = "back\\slash"`},
		{strings.Repeat("(", 10) + `userName eq "x"` + strings.Repeat(")", 10), `user_name = "x"`},
		{chain(32, `userName eq "x%d"`, " or "), "(" + chain(32, `user_name = "x%d"`, " OR ") + ")"},
		{`userName eq "x" or userName eq "x"`, `user_name = "x"`},
	} {
		f, err := parseFilter(c.filter)
		if err != nil {
			t.Errorf("%s: %v", c.filter, err)
			continue
		}
		if got := describe(*f); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.filter, got, c.want)
		}
	}
}

// TestBadFiltersAreInvalidFilter: every refusal is a 400 invalidFilter that says what is wrong.
func TestBadFiltersAreInvalidFilter(t *testing.T) {
	for _, c := range []struct{ filter, says string }{
		{`(((`, "not a SCIM filter"},
		{`userName regex "x"`, "not a SCIM filter"},
		{`nickName eq "x"`, "nickName is not an attribute"},
		{`active gt true`, "does not compare booleans"},
		{`active eq "yes"`, "compares with a boolean"},
		{`meta.lastModified gt "yesterday"`, "dateTime"},
		{`userName co 5`, "compares with a string"},
		{`active co "t"`, "compares strings only"},
		{`urn:example:Ext:userName eq "x"`, "core User schema"},
		{`phoneNumbers[type eq "work"]`, "emails and roles only"},
		{`emails[display eq "x"]`, "not an attribute"},
		{chain(33, `userName eq "x%d"`, " or "), "more than 32 comparisons"},
		{strings.Repeat("not (", 9) + `userName eq "x"` + strings.Repeat(")", 9), "nests deeper than 8"},
		{`userName eq "\q"`, "not a SCIM filter"},
		{"userName eq \"a\u0085b\"", "without control characters"},
		{"userName eq \"\xff\"", "UTF-8 text"},
		{`userName eq "` + strings.Repeat("x", 2000) + `"`, "bytes long"},
	} {
		_, err := parseFilter(c.filter)
		e := AsError(err)
		if e == nil || e.Status != 400 || e.Type != typeInvalidFilter || !strings.Contains(e.Detail, c.says) {
			t.Errorf("%.60s: %v, want a 400 invalidFilter saying %q", c.filter, err, c.says)
		}
	}
}
