package handlers

// A fuzz target for the collection-query parser (docs/API.md#the-routes and #lists-at-scale), held to
// a model of the contract: the seed data, filtered, sorted and paged by the test itself.

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protojson"

	usersv1 "usersd/gen/users/v1"
	"usersd/store"
	"usersd/store/storetest"
)

// FuzzCollectionQuery sends GET /users?<query>, or GET /users/1/posts?<query> when posts is set,
// with a fuzzed raw query (one that a request line can carry). Besides the fixture's invariants, the
// answer must be what the contract makes of the query:
//   - a malformed query (bad escape, ';', unknown parameter, a page or limit that is not a positive
//     int32, an unknown or repeated sort attribute, a name prefix no name could have, a pagination
//     other than keyset, page together with keyset paging) is 400;
//   - otherwise 200, with exactly the model's page of items (role filter, name prefix ignoring case,
//     sort with ties by id, default limit 20, limits above 100 lowered to 100), the true
//     X-Total-Count, and a Link header: for page numbers first and last, prev only after the first
//     page and next only before the last; for keyset paging first and, before the last page, next;
//     each keeping the request's other parameters.
//
// A cursor is a token the model cannot read: past the rules above, what it answers is left open.
func FuzzCollectionQuery(f *testing.F) {
	fx := fzNewFixture(f, fzOptions{bulk: 150})
	f.Fuzz(func(t *testing.T, posts bool, rawQuery string) {
		fx.begin(t)
		path := "/users"
		allowed := []string{"role", "sort", "namePrefix", "page", "limit", "pagination", "cursor"}
		if posts {
			path = "/users/" + strconv.Itoa(int(fzAda)) + "/posts"
			allowed = []string{"page", "limit", "pagination", "cursor"}
		}
		res, ok := fx.serve(t, fzRequest{method: http.MethodGet, target: path + "?" + rawQuery})
		if !ok {
			return // no request line carries this query
		}
		fx.check(t, res)
		fx.settle(t, res, nil) // a read writes nothing

		q, malformed := fzModelQuery(rawQuery, allowed)
		switch {
		case q == nil: // the contract does not say: 200 and 400 are both fine
			return
		case malformed != "":
			if res.status != http.StatusBadRequest {
				t.Fatalf("the query is malformed (%s), yet answered %d, want 400:\n%s", malformed, res.status, res)
			}
			return
		case res.status != http.StatusOK:
			t.Fatalf("a well-formed query answered %d, want 200:\n%s", res.status, res)
		}

		var ids []int32 // every matching item in order, before paging
		if posts {
			for _, p := range fx.baseline.Posts[fzAda] {
				ids = append(ids, p.ID)
			}
		} else {
			ids = fzModelUsers(fx.baseline.Users, q)
		}
		total := int32(len(ids))
		from := min(int64(q.page-1)*int64(q.limit), int64(total))
		wantPage := ids[from:min(from+int64(q.limit), int64(total))]

		gotPage := fzDecodeList(t, res, posts)
		if !slices.Equal(gotPage, wantPage) {
			t.Fatalf("page of ids %v, want %v (of %v, page %d, limit %d):\n%s", gotPage, wantPage, ids, q.page, q.limit, res)
		}
		if got := res.header.Get("X-Total-Count"); got != strconv.Itoa(int(total)) {
			t.Fatalf("X-Total-Count %q, want %d:\n%s", got, total, res)
		}
		if q.keyset {
			fzCheckKeysetLinks(t, res, path, q, total > q.limit)
			return
		}
		fzCheckLinks(t, res, path, q, total)
	})
}

// fzQuery is a well-formed query as the model reads it, with the defaults applied.
type fzQuery struct {
	values      url.Values
	role        string
	namePrefix  string
	sort        []store.SortKey
	page, limit int32
	keyset      bool // the first page of keyset paging (pagination=keyset without a cursor)
}

var fzInteger = regexp.MustCompile(`^[+-]?[0-9]+$`)

// fzModelQuery reads a raw query as the contract does. It returns a reason for a malformed query,
// and a nil query for one that the contract leaves open: a repeated parameter, or one whose name or
// value (unescaped) is not UTF-8.
func fzModelQuery(rawQuery string, allowed []string) (q *fzQuery, malformed string) {
	values, err := url.ParseQuery(rawQuery)
	if err != nil {
		return &fzQuery{}, err.Error()
	}
	for name, vs := range values {
		if !slices.Contains(allowed, name) {
			return &fzQuery{}, fmt.Sprintf("unknown parameter %q", name)
		}
		if len(vs) > 1 {
			return nil, ""
		}
	}
	for name, vs := range values {
		if !utf8.ValidString(name) || !utf8.ValidString(strings.Join(vs, "")) {
			return nil, "" // text that is not UTF-8: malformed, or matching no role; both are fine
		}
	}
	q = &fzQuery{values: values, role: values.Get("role"), namePrefix: values.Get("namePrefix"), page: 1, limit: 20}
	if n := utf8.RuneCountInString(q.namePrefix); n > 200 || strings.ContainsFunc(q.namePrefix, unicode.IsControl) {
		return &fzQuery{}, fmt.Sprintf("namePrefix=%q is longer than a name or holds a control character", q.namePrefix)
	}
	if n := utf8.RuneCountInString(q.role); n > 64 || strings.ContainsFunc(q.role, unicode.IsControl) {
		return &fzQuery{}, fmt.Sprintf("role=%q is longer than a role or holds a control character", q.role)
	}
	switch values.Get("pagination") {
	case "":
	case "keyset":
		q.keyset = true
	default:
		return &fzQuery{}, fmt.Sprintf("pagination=%q is not keyset", values.Get("pagination"))
	}
	if (q.keyset || values.Get("cursor") != "") && values.Get("page") != "" {
		return &fzQuery{}, "page is given with keyset paging"
	}
	for name, n := range map[string]*int32{"page": &q.page, "limit": &q.limit} {
		v := values.Get(name)
		if v == "" {
			continue // empty means absent
		}
		i, err := strconv.ParseInt(v, 10, 64)
		if !fzInteger.MatchString(v) || err != nil || i <= 0 || i > math.MaxInt32 {
			return &fzQuery{}, fmt.Sprintf("%s=%q is not a positive int32", name, v)
		}
		*n = int32(i)
	}
	q.limit = min(q.limit, 100)
	if values.Get("cursor") != "" {
		return nil, "" // a token the model cannot read: the rules above held, the rest is left open
	}
	if expr := values.Get("sort"); expr != "" {
		seen := map[string]bool{}
		for _, term := range strings.Split(expr, ",") {
			attr, descending := strings.CutPrefix(term, "-")
			if !slices.Contains([]string{"id", "name", "role", "createdAt"}, attr) || seen[attr] {
				return &fzQuery{}, fmt.Sprintf("sort term %q is unknown or repeated", term)
			}
			seen[attr] = true
			q.sort = append(q.sort, store.SortKey{Field: store.SortField(attr), Descending: descending})
		}
	}
	return q, ""
}

// fzModelUsers filters and sorts users as the contract says (storetest.ExpectedList: exact role,
// name prefix ignoring case, the sort keys in order, names and roles byte-wise, ties by id).
func fzModelUsers(users []store.User, q *fzQuery) []int32 {
	matching := storetest.ExpectedList(users, store.UserQuery{Role: q.role, NamePrefix: q.namePrefix, Sort: q.sort})
	ids := make([]int32, len(matching))
	for i, u := range matching {
		ids[i] = u.ID
	}
	return ids
}

// fzDecodeList reads a 200 list answer strictly (a JSON array of users or posts) into its ids.
func fzDecodeList(t *testing.T, res *fzResponse, posts bool) []int32 {
	t.Helper()
	var items []json.RawMessage
	if err := json.Unmarshal(res.body, &items); err != nil || items == nil {
		t.Fatalf("a list answer is not a JSON array (%v):\n%s", err, res)
	}
	ids := []int32{}
	for _, item := range items {
		if posts {
			p := &usersv1.Post{}
			if err := protojson.Unmarshal(item, p); err != nil || p.GetUserId() != fzAda {
				t.Fatalf("item %s is not a post of user %d (%v):\n%s", item, fzAda, err, res)
			}
			ids = append(ids, p.GetId())
			continue
		}
		u := &usersv1.User{}
		if err := protojson.Unmarshal(item, u); err != nil {
			t.Fatalf("item %s is not a user (%v):\n%s", item, err, res)
		}
		ids = append(ids, u.GetId())
	}
	return ids
}

var fzLinkPattern = regexp.MustCompile(`^<([^<>]*)>; rel="(first|prev|next|last)"$`)

// fzCheckLinks checks the Link header of a 200 list answer (RFC 8288, docs/API.md#the-routes).
func fzCheckLinks(t *testing.T, res *fzResponse, path string, q *fzQuery, total int32) {
	t.Helper()
	last := max(1, (total+q.limit-1)/q.limit)
	got := map[string]int32{}
	for _, link := range strings.Split(res.header.Get("Link"), ", ") {
		m := fzLinkPattern.FindStringSubmatch(link)
		if m == nil {
			t.Fatalf("Link element %q is not <reference>; rel=\"first|prev|next|last\":\n%s", link, res)
		}
		if _, twice := got[m[2]]; twice {
			t.Fatalf("Link has rel=%q twice:\n%s", m[2], res)
		}
		ref, err := url.Parse(m[1])
		if err != nil || ref.IsAbs() || ref.Host != "" || ref.Path != path {
			t.Fatalf("Link reference %q is not a relative reference to %s (%v):\n%s", m[1], path, err, res)
		}
		values, err := url.ParseQuery(ref.RawQuery)
		if err != nil {
			t.Fatalf("Link reference %q has a malformed query (%v):\n%s", m[1], err, res)
		}
		page, err := strconv.ParseInt(values.Get("page"), 10, 32)
		if err != nil || page < 1 {
			t.Fatalf("Link reference %q has no page:\n%s", m[1], res)
		}
		// Every other parameter of the request is kept as it was.
		values.Del("page")
		kept := url.Values{}
		for name, vs := range q.values {
			if name != "page" {
				kept[name] = vs
			}
		}
		if !fzSameValues(values, kept) {
			t.Fatalf("Link reference %q does not keep the request's parameters %v:\n%s", m[1], kept, res)
		}
		got[m[2]] = int32(page)
	}
	want := map[string]int32{"first": 1, "last": last}
	if q.page < last {
		want["next"] = q.page + 1
	}
	if q.page > 1 {
		// After the first page; past the end the contract does not say which page is previous.
		prev, ok := got["prev"]
		if !ok || prev < 1 || prev >= q.page {
			t.Fatalf("page %d of %d: Link has no prev before it:\n%s", q.page, last, res)
		}
		want["prev"] = prev
	}
	if !fzSameLinks(got, want) {
		t.Fatalf("Link pages %v, want %v (page %d, limit %d, %d items):\n%s", got, want, q.page, q.limit, total, res)
	}
}

func fzSameLinks(a, b map[string]int32) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// fzSameValues compares query values, reading an empty value as an absent parameter.
func fzSameValues(a, b url.Values) bool {
	nonEmpty := func(v url.Values) map[string]string {
		m := map[string]string{}
		for k, vs := range v {
			if len(vs) > 0 && vs[0] != "" {
				m[k] = vs[0]
			}
		}
		return m
	}
	x, y := nonEmpty(a), nonEmpty(b)
	if len(x) != len(y) {
		return false
	}
	for k, v := range x {
		if y[k] != v {
			return false
		}
	}
	return true
}

// fzCheckKeysetLinks checks the Link header of the first page of keyset paging: first (keyset, no
// cursor) and, when more follow, next (with a cursor), each keeping the request's other parameters.
func fzCheckKeysetLinks(t *testing.T, res *fzResponse, path string, q *fzQuery, more bool) {
	t.Helper()
	rels := map[string]bool{}
	for _, link := range strings.Split(res.header.Get("Link"), ", ") {
		m := fzLinkPattern.FindStringSubmatch(link)
		if m == nil || (m[2] != "first" && m[2] != "next") || rels[m[2]] {
			t.Fatalf("keyset Link element %q is not one first or next:\n%s", link, res)
		}
		rels[m[2]] = true
		ref, err := url.Parse(m[1])
		if err != nil || ref.IsAbs() || ref.Host != "" || ref.Path != path {
			t.Fatalf("Link reference %q is not a relative reference to %s (%v):\n%s", m[1], path, err, res)
		}
		values := ref.Query()
		if (m[2] == "next") != (values.Get("cursor") != "") || values.Get("pagination") != "keyset" {
			t.Fatalf("Link %s reference %q: next carries a cursor and first none, both keyset:\n%s", m[2], m[1], res)
		}
		values.Del("cursor")
		if !fzSameValues(values, q.values) {
			t.Fatalf("Link reference %q does not keep the request's parameters %v:\n%s", m[1], q.values, res)
		}
	}
	if !rels["first"] || rels["next"] != more {
		t.Fatalf("keyset Link has %v, want first and next=%v:\n%s", rels, more, res)
	}
}
