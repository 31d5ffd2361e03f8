package users

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	usersv1 "usersd/gen/users/v1"
	"usersd/store"
)

// wantCode fails the test unless err is an *Error with code (and, if given, reason).
func wantCode(t *testing.T, what string, err error, code connect.Code, reason ...Reason) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("%s: %v (%T), want a *users.Error with code %v", what, err, err, code)
	}
	if e.Code() != code || len(reason) > 0 && e.Reason() != reason[0] {
		t.Fatalf("%s: code %v reason %q (%v), want %v %v", what, e.Code(), e.Reason(), err, code, reason)
	}
}

func TestTextRules(t *testing.T) {
	for _, c := range []struct {
		name  string
		check func() error
		ok    bool
	}{
		{"a plain name", func() error { return checkRequiredText("name", "Ada Lovelace", maxNameLength) }, true},
		{"an empty name", func() error { return checkRequiredText("name", "", maxNameLength) }, false},
		{"a name of spaces", func() error { return checkRequiredText("name", "  \t ", maxNameLength) }, false},
		{"a name of zero-width spaces", func() error { return checkRequiredText("name", "\u200b\u200b", maxNameLength) }, false},
		{"a name of Hangul fillers", func() error { return checkRequiredText("name", "\u3164", maxNameLength) }, false},
		{"a name of exactly the limit", func() error { return checkRequiredText("name", strings.Repeat("é", maxNameLength), maxNameLength) }, true},
		{"a name one past the limit", func() error { return checkRequiredText("name", strings.Repeat("é", maxNameLength+1), maxNameLength) }, false},
		{"a control character", func() error { return checkLine("role", "a\x00b", maxRoleLength) }, false},
		{"a line separator", func() error { return checkLine("role", "a\u2028b", maxRoleLength) }, false},
		{"a bidirectional override", func() error { return checkLine("role", "a\u202eb", maxRoleLength) }, false},
		{"a bidirectional isolate", func() error { return checkLine("role", "a\u2066b", maxRoleLength) }, false},
		{"a right-to-left mark", func() error { return checkLine("role", "a\u200fb", maxRoleLength) }, true},
		{"an empty role", func() error { return checkLine("role", "", maxRoleLength) }, true},
		{"a body with line breaks and tabs", func() error { return checkText("body", "a\r\n\tb", maxBodyLength) }, true},
		{"a body with a bell", func() error { return checkText("body", "a\ab", maxBodyLength) }, false},
		{"a stored line with a separator (a page token's)", func() error { return checkStoredLine("name", "a\u2028b", maxNameLength) }, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.check()
			if c.ok {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			wantCode(t, c.name, err, connect.CodeInvalidArgument)
		})
	}
}

func TestIDsArePositive(t *testing.T) {
	for _, id := range []int32{0, -1, -2147483648} {
		wantCode(t, "id", checkID("id", id), connect.CodeInvalidArgument)
	}
	if err := checkID("id", 1); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "a body id that differs", checkBodyID("user.id", 2, 1), connect.CodeInvalidArgument)
	for _, got := range []int32{0, 1} {
		if err := checkBodyID("user.id", got, 1); err != nil {
			t.Fatalf("body id %d with target 1: %v", got, err)
		}
	}
}

func TestPagingRules(t *testing.T) {
	for _, c := range []struct {
		page, limit         int32
		token               string
		wantOffset          int64
		wantLimit           int
		wantInvalidArgument bool
	}{
		{0, 0, "", 0, defaultLimit, false},
		{1, 0, "", 0, defaultLimit, false},
		{3, 10, "", 20, 10, false},
		{1, maxLimit + 1, "", 0, maxLimit, false}, // lowered, not refused
		{-1, 0, "", 0, 0, true},
		{0, -1, "", 0, 0, true},
		{2, 0, "token", 0, 0, true}, // a token names its page
		{0, 0, "token", 0, defaultLimit, false},
	} {
		offset, limit, err := pageBounds(c.page, c.limit, c.token)
		if c.wantInvalidArgument {
			wantCode(t, "paging", err, connect.CodeInvalidArgument)
			continue
		}
		if err != nil || offset != c.wantOffset || limit != c.wantLimit {
			t.Errorf("pageBounds(%d, %d, %q) = %d, %d, %v; want %d, %d", c.page, c.limit, c.token, offset, limit, err, c.wantOffset, c.wantLimit)
		}
	}
}

func TestSortExpressions(t *testing.T) {
	keys, err := parseSort("role,-createdAt")
	if err != nil || len(keys) != 2 || keys[0] != (store.SortKey{Field: store.SortByRole}) ||
		keys[1] != (store.SortKey{Field: store.SortByCreatedAt, Descending: true}) {
		t.Fatalf("parseSort(role,-createdAt) = %v, %v", keys, err)
	}
	for _, bad := range []string{"age", "name,name", "name,-name", "-", ",", "name,", "created_at"} {
		_, err := parseSort(bad)
		wantCode(t, "sort "+bad, err, connect.CodeInvalidArgument)
	}
}

func TestAPageTokenIsBoundToItsQuery(t *testing.T) {
	sort := []store.SortKey{{Field: store.SortByName}, {Field: store.SortByCreatedAt, Descending: true}}
	binding := usersBinding("admin", "ad", "", false, sort, 20)
	u := store.User{ID: 7, Name: "Ada", Role: "admin"}
	token := userPageToken(binding, sort, u)
	c, err := userCursor(token, binding, sort)
	if err != nil || c.ID != 7 || c.Name != "Ada" {
		t.Fatalf("the token's own query: %+v, %v", c, err)
	}
	for name, other := range map[string]string{
		"another role":   usersBinding("guest", "ad", "", false, sort, 20),
		"another prefix": usersBinding("admin", "a", "", false, sort, 20),
		"another limit":  usersBinding("admin", "ad", "", false, sort, 21),
		"deleted shown":  usersBinding("admin", "ad", "", true, sort, 20),
		"another sort":   usersBinding("admin", "ad", "", false, sort[:1], 20),
		"the posts":      postsBinding(7, 20),
	} {
		_, err := userCursor(token, other, sort)
		wantCode(t, name, err, connect.CodeInvalidArgument)
	}
	for name, forged := range map[string]string{
		"not base64":        "!!!",
		"not JSON":          "bm90IGpzb24",
		"a name with a NUL": encodePageToken(pageToken{Query: binding, ID: 7, Name: ptr("a\x00"), CreatedAt: ptr(int64(0))}),
		"without its name":  encodePageToken(pageToken{Query: binding, ID: 7, CreatedAt: ptr(int64(0))}),
		"an id that is not": encodePageToken(pageToken{Query: binding, ID: 0, Name: ptr("a"), CreatedAt: ptr(int64(0))}),
		"a name too long":   encodePageToken(pageToken{Query: binding, ID: 7, Name: ptr(strings.Repeat("a", maxNameLength+1)), CreatedAt: ptr(int64(0))}),
	} {
		_, err := userCursor(forged, binding, sort)
		wantCode(t, name, err, connect.CodeInvalidArgument)
	}
}

func ptr[T any](v T) *T { return &v }

func TestEntityTags(t *testing.T) {
	if got := ETag(store.User{Version: 3}); got != `"3"` {
		t.Fatalf("ETag of version 3 = %s", got)
	}
	for _, c := range []struct {
		value          string
		strong, weak   bool // holds "3"
		invalidArgment bool
	}{
		{`"3"`, true, true, false},
		{`W/"3"`, false, true, false},
		{`"1", "3"`, true, true, false},
		{` , "3" ,`, true, true, false},
		{`*`, true, true, false},
		{`"4"`, false, false, false},
		{`"03"`, false, false, false},
		{`3`, false, false, true},
		{`"3`, false, false, true},
		{`"3" "4"`, false, false, true},
		{`""`, false, false, false},
		{`,`, false, false, true},
		{strings.Repeat(`"1",`, MaxEntityTags+1), false, false, true},
	} {
		tags, err := ParseEntityTags(c.value)
		if c.invalidArgment {
			wantCode(t, c.value, err, connect.CodeInvalidArgument)
			continue
		}
		if err != nil || tags.HoldsStrong(`"3"`) != c.strong || tags.HoldsWeak(`"3"`) != c.weak {
			t.Errorf("%s: strong %v weak %v (%v), want %v %v", c.value, tags.HoldsStrong(`"3"`), tags.HoldsWeak(`"3"`), err, c.strong, c.weak)
		}
	}
}

func TestAnEtagBecomesTheVersionsAWriteMayFind(t *testing.T) {
	for value, want := range map[string]store.IfVersion{
		``:           nil, // no condition
		`*`:          nil, // any existing user: a missing one is 404 anyway
		`"3"`:        {3},
		`"3", "5"`:   {3, 5},
		`W/"3"`:      {}, // a weak tag matches nothing under strong comparison
		`"03", "x"`:  {}, // tags that are not ours
		`"2", W/"4"`: {2},
	} {
		got, err := ifMatchVersions(value)
		if err != nil || (got == nil) != (want == nil) || len(got) != len(want) {
			t.Errorf("ifMatchVersions(%s) = %v, %v; want %v", value, got, err, want)
			continue
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("ifMatchVersions(%s) = %v, want %v", value, got, want)
			}
		}
	}
}

func TestUpdateMasks(t *testing.T) {
	user := &usersv1.User{Name: "Ada", Role: "admin"}
	for _, c := range []struct {
		name             string
		mask             *fieldmaskpb.FieldMask
		user             *usersv1.User
		setName, setRole bool
		invalid          bool
	}{
		{"no mask: the fields the user sets", nil, &usersv1.User{Role: "x"}, false, true, false},
		{"an empty mask: nothing", &fieldmaskpb.FieldMask{}, user, false, false, false},
		{"*: every writable field", &fieldmaskpb.FieldMask{Paths: []string{"*"}}, user, true, true, false},
		{"role alone, cleared", &fieldmaskpb.FieldMask{Paths: []string{"role"}}, &usersv1.User{}, false, true, false},
		{"output-only fields are ignored", &fieldmaskpb.FieldMask{Paths: []string{"etag", "id", "created_at"}}, user, false, false, false},
		{"an unknown field", &fieldmaskpb.FieldMask{Paths: []string{"nickname"}}, user, false, false, true},
		{"a name that must not be removed", &fieldmaskpb.FieldMask{Paths: []string{"name"}}, &usersv1.User{}, false, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			changes, err := userChanges(c.user, c.mask)
			if c.invalid {
				wantCode(t, c.name, err, connect.CodeInvalidArgument)
				return
			}
			if err != nil || (changes.Name != nil) != c.setName || (changes.Role != nil) != c.setRole {
				t.Fatalf("changes name %v role %v (%v), want name %v role %v", changes.Name != nil, changes.Role != nil, err, c.setName, c.setRole)
			}
		})
	}
}

func TestStoreErrorsBecomeTheirCodes(t *testing.T) {
	for _, c := range []struct {
		err    error
		code   connect.Code
		reason Reason
	}{
		{store.ErrNotFound, connect.CodeNotFound, ReasonUserNotFound},
		{store.ErrVersionMismatch, connect.CodeAborted, ReasonEtagMismatch},
		{store.ErrRequestInProgress, connect.CodeAborted, ReasonRequestInProgress},
		{store.ErrRequestMismatch, connect.CodeFailedPrecondition, ReasonRequestMismatch},
		{store.ErrUnavailable, connect.CodeUnavailable, "UNAVAILABLE"},
	} {
		wantCode(t, c.err.Error(), fromStore(errors.Join(errors.New("context"), c.err)), c.code, c.reason)
	}
	fault := errors.New("disk on fire")
	if got := fromStore(fault); got != fault {
		t.Fatalf("a fault became %v; it must stay a fault, for the final error handler to hide", got)
	}
}

// TestErrorsNameWhatTheyRefuse: every error has a reason (its own, or its code's), and names what it
// is about in its metadata: the field of a bad input, the id of a user that does not exist.
func TestErrorsNameWhatTheyRefuse(t *testing.T) {
	for _, c := range []struct {
		what     string
		err      error
		reason   Reason
		metadata map[string]string
	}{
		{"an empty name", checkRequiredText("name", "", maxNameLength), ReasonInvalidField, map[string]string{"field": "name"}},
		{"a bad update mask", func() error {
			_, err := userChanges(&usersv1.User{}, &fieldmaskpb.FieldMask{Paths: []string{"nope"}})
			return err
		}(),
			ReasonInvalidField, map[string]string{"field": "update_mask"}},
		{"a missing user", fromStore(fmt.Errorf("read: %w", store.UserNotFound{ID: 7})), ReasonUserNotFound, map[string]string{"id": "7"}},
		{"a missing user the store did not name", fromStore(store.ErrNotFound), ReasonUserNotFound, nil},
		{"a canceled request", fromStore(context.Canceled), "CANCELED", nil},
		{"an etag that does not match", fromStore(store.ErrVersionMismatch), ReasonEtagMismatch, nil},
	} {
		var e *Error
		if !errors.As(c.err, &e) {
			t.Fatalf("%s: %v (%T), want a *users.Error", c.what, c.err, c.err)
		}
		if e.Reason() != c.reason || !maps.Equal(e.Metadata(), c.metadata) {
			t.Errorf("%s: reason %q metadata %v, want %q %v", c.what, e.Reason(), e.Metadata(), c.reason, c.metadata)
		}
	}
}

func TestIdempotencyKeysArePrintableASCII(t *testing.T) {
	for _, ok := range []string{"", "a", strings.Repeat("k", MaxRequestIDLength), `"quoted" and \ too`} {
		if err := CheckRequestID("request_id", ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{strings.Repeat("k", MaxRequestIDLength+1), "tab\there", "é", "nul\x00"} {
		wantCode(t, bad, CheckRequestID("request_id", bad), connect.CodeInvalidArgument)
	}
	a, b := requestHash("CreateUser", "ab", "c"), requestHash("CreateUser", "a", "bc")
	if string(a) == string(b) {
		t.Fatal("two requests whose fields join to the same text have one hash")
	}
}
