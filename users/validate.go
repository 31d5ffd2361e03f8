// Input rules shared by every RPC and so by every REST route: ids, text fields, paging and sorting.
package users

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"usersd/store"
)

// Limits on text fields, in characters. They keep one record small enough that a page of 100 is a
// reasonable answer, and are documented on the proto fields.
const (
	maxNameLength  = 200
	maxRoleLength  = 64
	maxTitleLength = 200
	maxBodyLength  = 10_000
)

// Paging defaults, as docs/API.md#the-routes and the proto's ListUsersRequest state them.
const (
	defaultLimit = 20
	maxLimit     = 100
)

// checkID rejects ids that can never exist: ids are positive.
func checkID(field string, id int32) error {
	if id <= 0 {
		return InvalidField(field, "%s must be a positive integer, got %d", field, id)
	}
	return nil
}

// checkBodyID enforces that an id repeated in a body (output-only there) agrees with the target.
func checkBodyID(field string, got, want int32) error {
	if got != 0 && got != want {
		return InvalidField(field, "%s %d in the body does not match %d in the request; leave it out or make it equal", field, got, want)
	}
	return nil
}

// checkRequiredText checks a required single-line text field: present, with something to see, not
// too long. A name of spaces, zero-width spaces or filler letters alone would show as nothing.
func checkRequiredText(field, value string, maxLength int) error {
	if !strings.ContainsFunc(value, isVisible) {
		return InvalidField(field, "%s is required: it must hold at least one visible character", field)
	}
	return checkLine(field, value, maxLength)
}

// checkLine checks an optional single-line text field: not too long, and none of the characters
// that make text show other than it reads: control characters, line and paragraph separators
// (U+2028, U+2029), and the bidirectional embeddings, overrides and isolates (U+202A to U+202E,
// U+2066 to U+2069), which can make a name display as another. The bidirectional marks (U+200E,
// U+200F, U+061C) stay allowed: they change no order beyond their neighbours, and mixed-script
// names need them.
func checkLine(field, value string, maxLength int) error {
	if err := checkStoredLine(field, value, maxLength); err != nil {
		return err
	}
	if strings.ContainsFunc(value, isLineSeparator) {
		return InvalidField(field, "%s must be one line: no line or paragraph separators (U+2028, U+2029)", field)
	}
	if strings.ContainsFunc(value, isBidiOverride) {
		return InvalidField(field, "%s must not contain bidirectional embedding, override or isolate characters (U+202A to U+202E, U+2066 to U+2069)", field)
	}
	return nil
}

// checkStoredLine checks what every stored single-line value holds to, those stored before the
// rules on separators and bidirectional characters included: the length, and no control
// characters. Page tokens, which carry stored values back, are checked with it.
func checkStoredLine(field, value string, maxLength int) error {
	if n := utf8.RuneCountInString(value); n > maxLength {
		return InvalidField(field, "%s is %d characters long; at most %d are allowed", field, n, maxLength)
	}
	if !utf8.ValidString(value) {
		return InvalidField(field, "%s must be UTF-8 text", field)
	}
	if strings.ContainsFunc(value, unicode.IsControl) {
		return InvalidField(field, "%s must not contain control characters", field)
	}
	return nil
}

func isLineSeparator(r rune) bool { return r == '\u2028' || r == '\u2029' }

func isBidiOverride(r rune) bool {
	return '\u202A' <= r && r <= '\u202E' || '\u2066' <= r && r <= '\u2069'
}

// isVisible reports whether r draws something: a graphic character that is not a space and not one
// of the letters that Unicode draws blank (the Hangul fillers, the blank Braille pattern).
// Zero-width spaces and joiners are format characters, not graphic, so they do not count.
func isVisible(r rune) bool {
	switch r {
	case '\u115F', '\u1160', '\u3164', '\uFFA0', '\u2800':
		return false
	}
	return unicode.IsGraphic(r) && !unicode.IsSpace(r)
}

// checkText checks a multi-line text field: line breaks and tabs are fine, other control characters not.
func checkText(field, value string, maxLength int) error {
	if n := utf8.RuneCountInString(value); n > maxLength {
		return InvalidField(field, "%s is %d characters long; at most %d are allowed", field, n, maxLength)
	}
	if strings.ContainsFunc(value, func(r rune) bool { return unicode.IsControl(r) && r != '\n' && r != '\r' && r != '\t' }) {
		return InvalidField(field, "%s must not contain control characters other than line breaks and tabs", field)
	}
	return nil
}

// pageBounds turns a page and limit (0 meaning the default) into an offset and an effective limit.
// A page token names the page itself, so it cannot come with a page number.
func pageBounds(page, limit int32, pageToken string) (offset int64, effectiveLimit int, err error) {
	if page < 0 {
		return 0, 0, InvalidField("page", "page must be a positive integer, got %d", page)
	}
	if page != 0 && pageToken != "" {
		return 0, 0, InvalidField("page", "give page or page_token (cursor on REST), not both")
	}
	if limit < 0 {
		return 0, 0, InvalidField("limit", "limit must be a positive integer, got %d", limit)
	}
	page, limit = EffectivePaging(page, limit)
	return int64(page-1) * int64(limit), int(limit), nil
}

// effectivePaging applies the defaults to a page and limit that are not negative.
func EffectivePaging(page, limit int32) (int32, int32) {
	if page == 0 {
		page = 1
	}
	switch {
	case limit == 0:
		limit = defaultLimit
	case limit > maxLimit:
		limit = maxLimit
	}
	return page, limit
}

// sortable reports whether lists sort by field: each sort field has its indexes on both backends,
// alone and within a role. FindUsers also sorts by user name, which has its index alone.
func sortable(field store.SortField) bool {
	switch field {
	case store.SortByID, store.SortByName, store.SortByRole, store.SortByCreatedAt:
		return true
	}
	return false
}

// parseSort reads a sort expression such as "role,-createdAt": attributes separated by commas, each
// with an optional leading "-" for descending order, none repeated.
func parseSort(expr string) ([]store.SortKey, error) {
	if expr == "" {
		return nil, nil
	}
	var keys []store.SortKey
	seen := map[store.SortField]bool{}
	for term := range strings.SplitSeq(expr, ",") {
		key := store.SortKey{Field: store.SortField(strings.TrimPrefix(term, "-")), Descending: strings.HasPrefix(term, "-")}
		if !sortable(key.Field) {
			return nil, InvalidField("sort", "sort: cannot sort by %q; use id, name, role or createdAt, with a leading - for descending order", term)
		}
		if seen[key.Field] {
			return nil, InvalidField("sort", "sort: %s appears more than once", key.Field)
		}
		seen[key.Field] = true
		keys = append(keys, key)
	}
	return keys, nil
}

// CheckRole checks a role as every face takes one: a single line of at most maxRoleLength
// characters. Other rules than the users' (a webhook subscription's role) hold roles to it too.
func CheckRole(field, role string) error { return checkLine(field, role, maxRoleLength) }
