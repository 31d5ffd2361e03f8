package handlers

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"usersd/internal/apitest"
)

// seedQueryUsers creates users whose names and roles make every sort order distinct, and returns
// their ids in creation order.
func seedQueryUsers(t *testing.T, s *testServer) []int {
	t.Helper()
	var ids []int
	for _, u := range []struct{ name, role string }{
		{"carol", "admin"}, {"alice", "user"}, {"Bob", "user"}, {"dave", ""}, {"alice", "admin"}, {"erin", "Admin"},
	} {
		ids = append(ids, apitest.IDOf(t, s.CreateUser(t, u.name, u.role)))
	}
	return ids
}

func TestRESTCollectionQuery(t *testing.T) {
	s := startServer(t)
	ids := seedQueryUsers(t, s) // carol admin, alice user, Bob user, dave -, alice admin, erin Admin
	byIndex := func(is ...int) []int {
		var out []int
		for _, i := range is {
			out = append(out, ids[i])
		}
		return out
	}
	cases := []struct {
		name, query string
		want        []int
		total       string
	}{
		{"without a query users come by id", "", byIndex(0, 1, 2, 3, 4, 5), "6"},
		{"an empty value means the parameter is absent", "?role=&sort=&page=&limit=", byIndex(0, 1, 2, 3, 4, 5), "6"},
		{"the role filter is exact and case-sensitive", "?role=admin", byIndex(0, 4), "2"},
		{"names sort byte-wise with ties by id", "?sort=name", byIndex(2, 1, 4, 0, 3, 5), "6"},
		{"a leading minus sorts descending, ties still by id ascending", "?sort=-name", byIndex(5, 3, 0, 1, 4, 2), "6"},
		{"several attributes sort in order", "?sort=role,-name", byIndex(3, 5, 0, 4, 1, 2), "6"},
		{"createdAt sorts by creation time", "?sort=-createdAt", byIndex(5, 4, 3, 2, 1, 0), "6"},
		{"filter, sort and page combine", "?role=user&sort=name&limit=1&page=2", byIndex(1), "2"},
		{"a page past the end is empty with the true total", "?page=9&limit=5", nil, "6"},
		{"limit above 100 is lowered to 100", "?limit=1000", byIndex(0, 1, 2, 3, 4, 5), "6"},
	}
	for _, tr := range apitest.Transports {
		for _, c := range cases {
			t.Run(tr.Name+"/"+c.name, func(t *testing.T) {
				res := s.Do(t, tr.Client, request{Method: "GET", Path: "/users" + c.query})
				if res.Status != http.StatusOK {
					t.Fatalf("%d %s", res.Status, res.Body)
				}
				var got []int
				for _, u := range apitest.DecodeArray(t, res.Body) {
					got = append(got, apitest.IDOf(t, u))
				}
				if !slices.Equal(got, c.want) || res.Header.Get("X-Total-Count") != c.total {
					t.Fatalf("ids %v total %s, want %v total %s", got, res.Header.Get("X-Total-Count"), c.want, c.total)
				}
			})
		}
	}
}

func TestRESTLinkHeader(t *testing.T) {
	s := startServer(t)
	for i := range 5 {
		s.CreateUser(t, fmt.Sprintf("user %d", i), "staff")
	}
	cases := []struct{ name, query, want string }{
		{"the first page has no prev", "?limit=2&role=staff",
			`</users?limit=2&page=1&role=staff>; rel="first", </users?limit=2&page=2&role=staff>; rel="next", </users?limit=2&page=3&role=staff>; rel="last"`},
		{"a middle page has all four", "?limit=2&page=2&sort=-name",
			`</users?limit=2&page=1&sort=-name>; rel="first", </users?limit=2&page=1&sort=-name>; rel="prev", </users?limit=2&page=3&sort=-name>; rel="next", </users?limit=2&page=3&sort=-name>; rel="last"`},
		{"the last page has no next", "?limit=2&page=3",
			`</users?limit=2&page=1>; rel="first", </users?limit=2&page=2>; rel="prev", </users?limit=2&page=3>; rel="last"`},
		{"past the end, prev leads back to the last page", "?limit=2&page=7",
			`</users?limit=2&page=1>; rel="first", </users?limit=2&page=3>; rel="prev", </users?limit=2&page=3>; rel="last"`},
		{"an empty result has one page", "?role=nobody",
			`</users?page=1&role=nobody>; rel="first", </users?page=1&role=nobody>; rel="last"`},
	}
	for _, tr := range apitest.Transports {
		for _, c := range cases {
			t.Run(tr.Name+"/"+c.name, func(t *testing.T) {
				res := s.Do(t, tr.Client, request{Method: "GET", Path: "/users" + c.query})
				if got := res.Header.Get("Link"); got != c.want {
					t.Fatalf("Link\n got %s\nwant %s", got, c.want)
				}
			})
		}
	}
}

func TestRESTRejectsMalformedQueries(t *testing.T) {
	s := startServer(t)
	author := apitest.IDOf(t, s.CreateUser(t, "author", ""))
	posts := fmt.Sprintf("/users/%d/posts", author)
	cases := []struct{ path, wantInMessage string }{
		{"/users?page=abc", "page"},
		{"/users?page=0", "page"},
		{"/users?page=-1", "page"},
		{"/users?page=1.5", "page"},
		{"/users?page=99999999999", "page"},
		{"/users?limit=0", "limit"},
		{"/users?limit=-5", "limit"},
		{"/users?limit=ten", "limit"},
		{"/users?sort=age", "sort"},
		{"/users?sort=name,", "sort"},
		{"/users?sort=name,-name", "sort"},
		{"/users?sort=+name", "sort"},
		{"/users?sortt=name", "sortt"},
		{"/users?page=1&page=2", "page"},
		{"/users?role=a&role=b", "role"},
		{"/users?%zz=1", "query"},
		{posts + "?sort=id", "sort"},
		{posts + "?role=admin", "role"},
		{posts + "?page=0", "page"},
		{posts + "?limit=x", "limit"},
	}
	wantBadRequests(t, s, cases)
}

// wantBadRequests GETs each case's path over every transport and wants 400 with a message that
// names what is wrong.
func wantBadRequests(t *testing.T, s *testServer, cases []struct{ path, wantInMessage string }) {
	t.Helper()
	for _, tr := range apitest.Transports {
		for _, c := range cases {
			t.Run(tr.Name+" "+c.path, func(t *testing.T) {
				res := s.Do(t, tr.Client, request{Method: "GET", Path: c.path})
				if res.Status != http.StatusBadRequest {
					t.Fatalf("%d %s, want 400", res.Status, res.Body)
				}
				if msg := res.ErrorMessage(t); !strings.Contains(msg, c.wantInMessage) {
					t.Fatalf("message %q does not name %q", msg, c.wantInMessage)
				}
			})
		}
	}
}
