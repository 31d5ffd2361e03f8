// The REST collection query: strict parameter parsing, page-number or keyset paging, and paging
// metadata in the X-Total-Count and Link headers.
package handlers

import (
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"usersd/users"
)

// collectionQuery is a parsed query string: only known parameters, each at most once.
type collectionQuery struct {
	values url.Values // as sent, kept for the Link header
}

// parseCollectionQuery rejects anything but the allowed parameters, so that a typo such as "sortt"
// cannot pass unnoticed, and any parameter given twice, since only one value could be used.
func parseCollectionQuery(r *http.Request, allowed ...string) (collectionQuery, error) {
	values, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return collectionQuery{}, users.InvalidField("query", "malformed query string: %v", err)
	}
	for name, vs := range values {
		field := strings.ToValidUTF8(name, "\uFFFD")
		if field == "" { // "?=0": a parameter without a name is named by the query it is in
			field = "query"
		}
		if !utf8.ValidString(name) || !utf8.ValidString(strings.Join(vs, "")) {
			return collectionQuery{}, users.InvalidField(field, "query parameter %q is not valid UTF-8", field)
		}
		if !slices.Contains(allowed, name) {
			return collectionQuery{}, users.InvalidField(field, "unknown query parameter %q; allowed: %s", name, strings.Join(allowed, ", "))
		}
		if len(vs) > 1 {
			return collectionQuery{}, users.InvalidField(field, "query parameter %q is given %d times; give it once", name, len(vs))
		}
	}
	return collectionQuery{values: values}, nil
}

// text returns a parameter's value; absent and empty are the same.
func (q collectionQuery) text(name string) string { return q.values.Get(name) }

// flag returns a parameter that is true or false, false when it is absent or empty.
func (q collectionQuery) flag(name string) (bool, error) { return parseFlag(name, q.values.Get(name)) }

// queryFlag returns the flag parameter name of a route that takes no collection query (and so
// leaves the parameters it does not know alone): r's one value of it, true or false.
func queryFlag(r *http.Request, name string) (bool, error) {
	query, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		// Query drops what it cannot parse: a malformed purge=true must not pass as absent.
		return false, users.InvalidField("query", "malformed query string: %v", err)
	}
	values := query[name]
	if len(values) > 1 {
		return false, users.InvalidField(name, "query parameter %q is given %d times; give it once", name, len(values))
	}
	if len(values) == 0 {
		return false, nil
	}
	return parseFlag(name, values[0])
}

// parseFlag reads a flag's value as JSON writes a boolean: true, false, or empty for false.
func parseFlag(name, value string) (bool, error) {
	switch value {
	case "true":
		return true, nil
	case "false", "":
		return false, nil
	}
	return false, users.InvalidField(name, "%s must be true or false, got %q", name, strings.ToValidUTF8(value, "\uFFFD"))
}

// positive returns a parameter that must be a positive integer, or 0 when it is absent or empty.
func (q collectionQuery) positive(name string) (int32, error) {
	v := q.values.Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n <= 0 {
		return 0, users.InvalidField(name, "%s must be a positive integer up to %d, got %q", name, int32(^uint32(0)>>1), v)
	}
	return int32(n), nil
}

// paging is how a request pages: by page number (the default), or by keyset (GitLab's style:
// pagination=keyset for the first page, cursor for the page after a token; a cursor alone implies
// keyset). Zero values mean absent.
type paging struct {
	page, limit int32
	keyset      bool
	cursor      string
}

// paging reads the paging parameters; page together with keyset paging is an error, since the two
// name different pages.
func (q collectionQuery) paging() (paging, error) {
	var p paging
	var err error
	if p.page, err = q.positive("page"); err != nil {
		return paging{}, err
	}
	if p.limit, err = q.positive("limit"); err != nil {
		return paging{}, err
	}
	switch mode := q.text("pagination"); mode {
	case "", "keyset":
		p.keyset = mode == "keyset"
	default:
		return paging{}, users.InvalidField("pagination", "pagination must be keyset (or absent, for page numbers), got %q", mode)
	}
	p.cursor = q.text("cursor")
	p.keyset = p.keyset || p.cursor != ""
	if p.keyset && p.page != 0 {
		return paging{}, users.InvalidField("page", "page cannot be combined with keyset paging (pagination=keyset or cursor); follow the Link header's next instead")
	}
	return p, nil
}

// setListHeaders sets X-Total-Count and the Link header of either kind of paging; nextToken is the
// list's next_page_token, empty on the last page.
func setListHeaders(w http.ResponseWriter, r *http.Request, q collectionQuery, p paging, total int32, nextToken string) {
	if !p.keyset {
		setPagingHeaders(w, r, q, p.page, p.limit, total)
		return
	}
	// first drops the cursor and says keyset explicitly; next carries the cursor.
	links := []string{q.link(r, "first", func(v url.Values) { v.Del("cursor"); v.Set("pagination", "keyset") })}
	if nextToken != "" {
		links = append(links, q.link(r, "next", func(v url.Values) { v.Set("cursor", nextToken) }))
	}
	w.Header().Set("X-Total-Count", strconv.Itoa(int(total)))
	w.Header().Set("Link", strings.Join(links, ", "))
}

// setPagingHeaders sets X-Total-Count and a Link header (RFC 8288) with first, prev, next and last
// pages as relative references that keep every other parameter of the request.
func setPagingHeaders(w http.ResponseWriter, r *http.Request, q collectionQuery, page, limit, total int32) {
	page, limit = users.EffectivePaging(page, limit)
	last := max(1, (total+limit-1)/limit)
	link := func(n int32, rel string) string {
		return q.link(r, rel, func(v url.Values) { v.Set("page", strconv.Itoa(int(n))) })
	}
	links := []string{link(1, "first")}
	if page > 1 {
		links = append(links, link(min(page-1, last), "prev"))
	}
	if page < last {
		links = append(links, link(page+1, "next"))
	}
	links = append(links, link(last, "last"))
	w.Header().Set("X-Total-Count", strconv.Itoa(int(total)))
	w.Header().Set("Link", strings.Join(links, ", "))
}

// link is one element of a Link header: a relative reference to the request's path with the
// request's parameters as edit leaves them, so that every link keeps what it does not change.
func (q collectionQuery) link(r *http.Request, rel string, edit func(url.Values)) string {
	values := maps.Clone(q.values)
	edit(values)
	return fmt.Sprintf(`<%s?%s>; rel="%s"`, r.URL.Path, values.Encode(), rel)
}
