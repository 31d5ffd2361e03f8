package handlers

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"usersd/internal/apitest"
)

// linkTarget returns the target of the Link header's relation rel, or "" if it has none.
func linkTarget(t *testing.T, header http.Header, rel string) string {
	t.Helper()
	for _, m := range regexp.MustCompile(`<([^>]*)>; rel="([a-z]+)"`).FindAllStringSubmatch(header.Get("Link"), -1) {
		if m[2] == rel {
			return m[1]
		}
	}
	return ""
}

// listIDs GETs path and returns the ids of the listed items, failing on anything but 200.
func (s *testServer) listIDs(t *testing.T, client *http.Client, path string) ([]int, response) {
	t.Helper()
	res := s.Do(t, client, request{Method: "GET", Path: path})
	if res.Status != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, res.Status, res.Body)
	}
	var ids []int
	for _, item := range apitest.DecodeArray(t, res.Body) {
		ids = append(ids, apitest.IDOf(t, item))
	}
	return ids, res
}

// walkKeyset follows the Link header's next from the first keyset page of query to the end and
// returns every id on the way, checking the total and the first link of every page.
func (s *testServer) walkKeyset(t *testing.T, client *http.Client, path, query string, wantTotal int) []int {
	t.Helper()
	var all []int
	next := path + "?pagination=keyset&" + query
	for pages := 0; next != ""; pages++ {
		if pages > wantTotal+1 {
			t.Fatalf("the walk from %s does not end", path+"?"+query)
		}
		ids, res := s.listIDs(t, client, next)
		if got := res.Header.Get("X-Total-Count"); got != fmt.Sprint(wantTotal) {
			t.Fatalf("GET %s: X-Total-Count %s, want %d", next, got, wantTotal)
		}
		first := linkTarget(t, res.Header, "first")
		if u, err := url.Parse(first); err != nil || u.Query().Get("pagination") != "keyset" || u.Query().Has("cursor") || u.Query().Has("page") {
			t.Fatalf("GET %s: first link %q is not the keyset first page", next, first)
		}
		if linkTarget(t, res.Header, "last") != "" || linkTarget(t, res.Header, "prev") != "" {
			t.Fatalf("GET %s: keyset Link %q has last or prev", next, res.Header.Get("Link"))
		}
		all = append(all, ids...)
		next = linkTarget(t, res.Header, "next")
	}
	return all
}

func TestRESTKeysetPagingWalksWhatPageNumbersList(t *testing.T) {
	s := startServer(t)
	for i := range 23 {
		s.CreateUser(t, []string{"Ada", "ada", "Bob", "Ádám", "carol"}[i%5], []string{"editor", "", "viewer"}[i%3])
	}
	cases := []struct{ keyset, sameList string }{ // sameList: the same list, on one page of page numbers
		{"limit=4", ""},
		{"sort=-name&limit=3", "sort=-name"},
		{"sort=role,-createdAt&limit=5", "sort=role,-createdAt"},
		{"role=editor&sort=-role&limit=2", "role=editor&sort=-role"},
		{"namePrefix=ad&sort=name&limit=2", "namePrefix=ad&sort=name"},
		{"namePrefix=ÁD&limit=1", "namePrefix=ÁD"},
		{"role=nobody", "role=nobody"},
		{"sort=-id&limit=100", "sort=-id"},
	}
	for _, tr := range apitest.Transports {
		for _, c := range cases {
			t.Run(tr.Name+"/"+c.keyset, func(t *testing.T) {
				want, res := s.listIDs(t, tr.Client, "/users?limit=100&"+c.sameList)
				if res.Header.Get("X-Total-Count") != fmt.Sprint(len(want)) {
					t.Fatalf("page numbers: X-Total-Count %s for %d users", res.Header.Get("X-Total-Count"), len(want))
				}
				if got := s.walkKeyset(t, tr.Client, "/users", c.keyset, len(want)); !slices.Equal(got, want) {
					t.Fatalf("keyset walk %v, want %v", got, want)
				}
			})
		}
	}
}

func TestRESTNamePrefixSearchIgnoresCase(t *testing.T) {
	s := startServer(t)
	ada := apitest.IDOf(t, s.CreateUser(t, "Ada Lovelace", "admin"))
	adam := apitest.IDOf(t, s.CreateUser(t, "ADAM", ""))
	s.CreateUser(t, "Grace", "admin")
	kelvin := apitest.IDOf(t, s.CreateUser(t, "\u212Aelvin", ""))
	for _, c := range []struct {
		query string
		want  []int
	}{
		{"namePrefix=ada", []int{ada, adam}},
		{"namePrefix=ADA%20L", []int{ada}},
		{"namePrefix=ada&role=admin", []int{ada}},
		{"namePrefix=kel", []int{kelvin}},              // the Kelvin sign folds with k
		{"namePrefix=ada&sort=name", []int{adam, ada}}, // byte-wise: "ADAM" < "Ada Lovelace"
		{"namePrefix=zz", nil},
		{"namePrefix=", []int{ada, adam, ada + 2, kelvin}}, // empty means absent
	} {
		for _, tr := range apitest.Transports {
			ids, res := s.listIDs(t, tr.Client, "/users?"+c.query)
			if !slices.Equal(ids, c.want) || res.Header.Get("X-Total-Count") != fmt.Sprint(len(c.want)) {
				t.Errorf("%s %s: ids %v total %s, want %v", tr.Name, c.query, ids, res.Header.Get("X-Total-Count"), c.want)
			}
		}
	}
}

func TestRESTPostsPageByCursor(t *testing.T) {
	s := startServer(t)
	author := apitest.IDOf(t, s.CreateUser(t, "author", ""))
	path := fmt.Sprintf("/users/%d/posts", author)
	for i := range 5 {
		res := s.Do(t, apitest.HTTP1Client, request{Method: "POST", Path: path, Header: apitest.JSONBody, Body: fmt.Sprintf(`{"title":"post %d"}`, i), Key: true})
		if res.Status != http.StatusCreated {
			t.Fatalf("create post: %d %s", res.Status, res.Body)
		}
	}
	for _, tr := range apitest.Transports {
		want, _ := s.listIDs(t, tr.Client, path)
		if got := s.walkKeyset(t, tr.Client, path, "limit=2", 5); !slices.Equal(got, want) || len(want) != 5 {
			t.Fatalf("%s: keyset walk of posts %v, want %v", tr.Name, got, want)
		}
	}
}

func TestRESTRejectsBadKeysetQueries(t *testing.T) {
	s := startServer(t)
	for i := range 3 {
		s.CreateUser(t, fmt.Sprintf("user %d", i), "")
	}
	author := apitest.IDOf(t, s.CreateUser(t, "author", ""))
	_, first := s.listIDs(t, apitest.HTTP1Client, "/users?pagination=keyset&limit=1&sort=name")
	cursor := url.QueryEscape(mustQuery(t, linkTarget(t, first.Header, "next")).Get("cursor"))
	cases := []struct{ path, wantInMessage string }{
		{"/users?pagination=keyset&page=2", "page"},
		{"/users?cursor=" + cursor + "&page=1", "page"},
		{"/users?pagination=offset", "pagination"},
		{"/users?pagination=KEYSET", "pagination"},
		{"/users?cursor=" + cursor + "&limit=1&sort=-name", "another query"}, // another sort
		{"/users?cursor=" + cursor + "&limit=2&sort=name", "another query"},  // another limit
		{"/users?cursor=" + cursor + "&limit=1&sort=name&role=x", "another query"},
		{"/users?cursor=" + cursor + "&limit=1&sort=name&namePrefix=u", "another query"},
		{fmt.Sprintf("/users/%d/posts?cursor=%s&limit=1", author, cursor), "another query"},
		{"/users?cursor=not-a-token", "cursor"},
		{"/users?cursor=" + url.QueryEscape("eyJxIjoiMCIsImkiOjF9"), "another query"}, // a well-formed token of no query
		{"/users?namePrefix=a%00b", "namePrefix"},
		{"/users?namePrefix=" + strings.Repeat("a", 201), "namePrefix"},
	}
	wantBadRequests(t, s, cases)
}

func mustQuery(t *testing.T, target string) url.Values {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatalf("link target %q: %v", target, err)
	}
	return u.Query()
}
