package handlers

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"testing"

	"connectrpc.com/connect"

	usersv1 "usersd/gen/users/v1"
	"usersd/internal/apitest"
)

// TestFiltersOverEveryProtocol: a filter travels on REST (the filter parameter) and on every RPC
// protocol (ListUsersRequest.filter) and keeps the same users, with an exact total; a bad one is
// 400 / invalid_argument naming filter; a page token is bound to its filter. The operators
// themselves are held to their meaning on both backends in store/storetest and users/filter_test.go.
func TestFiltersOverEveryProtocol(t *testing.T) {
	s := startServer(t)
	for _, body := range []string{
		`{"name":"Ada","role":"admin","userName":"ada","email":"ada@example.com","labels":{"team":"infra"}}`,
		`{"name":"Grace","role":"admin","userName":"grace","email":"grace@example.com","active":false}`,
		`{"name":"Linus","role":"viewer","userName":"linus","labels":{"team":"kernel"}}`,
		`{"name":"Barbara","role":"viewer","email":"barbara@example.org","labels":{"team":"infra"}}`,
	} {
		if res := s.Do(t, apitest.HTTP1Client, request{Method: "POST", Path: "/users", Header: apitest.JSONBody, Key: true, Body: body}); res.Status != http.StatusCreated {
			t.Fatalf("create %s: %d %s", body, res.Status, res.Body)
		}
	}
	cases := []struct {
		filter string
		names  []string
	}{
		{`email = "ADA@example.com" OR userName = "ADA@example.com"`, []string{"Ada"}},
		{`userName = "gr*"`, []string{"Grace"}},
		{`labels.team = "infra"`, []string{"Ada", "Barbara"}},
		{`labels:team AND role = "viewer"`, []string{"Linus", "Barbara"}},
		{`active = false`, []string{"Grace"}},
		{`role = "admin" AND NOT active = false`, []string{"Ada"}},
		{`email = "nobody@example.com"`, nil},
	}
	for _, c := range cases {
		t.Run("REST "+c.filter, func(t *testing.T) {
			res := s.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: "/users?filter=" + url.QueryEscape(c.filter)})
			var names []string
			if res.Status == http.StatusOK {
				for _, u := range apitest.DecodeArray(t, res.Body) {
					names = append(names, fmt.Sprint(u["name"]))
				}
			}
			if res.Status != http.StatusOK || !slices.Equal(names, c.names) || res.Header.Get("X-Total-Count") != fmt.Sprint(len(c.names)) {
				t.Errorf("%d, total %s, %v; want %v", res.Status, res.Header.Get("X-Total-Count"), names, c.names)
			}
		})
		for _, p := range apitest.RPCProtocols {
			t.Run(p.Name+" "+c.filter, func(t *testing.T) {
				res, err := s.RPCClient(p, "").ListUsers(t.Context(), &usersv1.ListUsersRequest{Filter: c.filter})
				apitest.RPCMust(t, "ListUsers", err)
				var names []string
				for _, u := range res.GetUsers() {
					names = append(names, u.GetName())
				}
				if !slices.Equal(names, c.names) || int(res.GetTotalCount()) != len(c.names) {
					t.Errorf("total %d, %v; want %v", res.GetTotalCount(), names, c.names)
				}
			})
		}
	}

	// A bad filter is the client's error, naming the filter and where in it.
	for _, bad := range []string{`colour = "red"`, `id = "x"`, `active = 1`, `(role = "a"`, `labels.Team = "x"`} {
		res := s.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: "/users?filter=" + url.QueryEscape(bad)})
		if res.Status != http.StatusBadRequest || res.ErrorReason(t) != "INVALID_FIELD" {
			t.Errorf("filter %q: %d %s; want 400 INVALID_FIELD", bad, res.Status, res.Body)
		}
		_, err := s.RPCClient(apitest.RPCProtocols[0], "").ListUsers(t.Context(), &usersv1.ListUsersRequest{Filter: bad})
		if connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Errorf("filter %q over RPC: %v; want invalid_argument", bad, err)
		}
	}

	// A page token is bound to its filter.
	c := s.RPCClient(apitest.RPCProtocols[0], "")
	first, err := c.ListUsers(t.Context(), &usersv1.ListUsersRequest{Filter: `labels:team`, Limit: 1})
	apitest.RPCMust(t, "ListUsers", err)
	if first.GetNextPageToken() == "" || first.GetTotalCount() != 3 {
		t.Fatalf("the first page of three labelled users: %v", first)
	}
	if _, err := c.ListUsers(t.Context(), &usersv1.ListUsersRequest{Filter: `labels:team AND role = "viewer"`, Limit: 1, PageToken: first.GetNextPageToken()}); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Errorf("a page token with another filter: %v; want invalid_argument", err)
	}
	second, err := c.ListUsers(t.Context(), &usersv1.ListUsersRequest{Filter: `labels:team`, Limit: 1, PageToken: first.GetNextPageToken()})
	apitest.RPCMust(t, "ListUsers", err)
	if len(second.GetUsers()) != 1 || second.GetUsers()[0].GetId() == first.GetUsers()[0].GetId() {
		t.Errorf("the second page: %v after %v", second.GetUsers(), first.GetUsers())
	}
}
