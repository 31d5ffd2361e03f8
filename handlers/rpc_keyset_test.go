package handlers

import (
	"fmt"
	"net/url"
	"slices"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	usersv1 "usersd/gen/users/v1"
	"usersd/gen/users/v1/usersv1connect"
	"usersd/internal/apitest"
)

// rpcWalkUsers follows next_page_token from the first page of first to the end and returns the ids.
func rpcWalkUsers(t *testing.T, c usersv1connect.UsersClient, first *usersv1.ListUsersRequest, wantTotal int32) []int32 {
	t.Helper()
	req := proto.CloneOf(first)
	var ids []int32
	for pages := 0; ; pages++ {
		if pages > int(wantTotal)+1 {
			t.Fatalf("the walk of %v does not end", req)
		}
		res, err := c.ListUsers(t.Context(), req)
		apitest.RPCMust(t, "ListUsers", err)
		if res.GetTotalCount() != wantTotal {
			t.Fatalf("page %d: total_count %d, want %d", pages+1, res.GetTotalCount(), wantTotal)
		}
		for _, u := range res.GetUsers() {
			ids = append(ids, u.GetId())
		}
		if res.GetNextPageToken() == "" {
			return ids
		}
		req.PageToken = res.GetNextPageToken()
	}
}

func TestRPCPageTokensWalkWhatPageNumbersList(t *testing.T) {
	s := startServer(t)
	seedKey := s.RPCClient(apitest.RPCProtocols[0], apitest.Key)
	for i := range 17 {
		apitest.RPCCreate(t, seedKey, []string{"Ada", "ada", "Bob", "Ádám"}[i%4], []string{"editor", "", "viewer"}[i%3])
	}
	queries := []*usersv1.ListUsersRequest{
		{Limit: 3},
		{Sort: "-name", Limit: 4},
		{Sort: "-role,createdAt", Limit: 5},
		{Role: "editor", Sort: "name", Limit: 2},
		{NamePrefix: "AD", Sort: "-createdAt", Limit: 3},
	}
	for _, p := range apitest.RPCProtocols {
		c := s.RPCClient(p, "")
		for _, q := range queries {
			t.Run(fmt.Sprintf("%s/%v", p.Name, q), func(t *testing.T) {
				whole, err := c.ListUsers(t.Context(), &usersv1.ListUsersRequest{Role: q.Role, Sort: q.Sort, NamePrefix: q.NamePrefix, Limit: 100})
				apitest.RPCMust(t, "ListUsers", err)
				if whole.GetNextPageToken() != "" {
					t.Fatalf("a list on one page has a next_page_token")
				}
				var want []int32
				for _, u := range whole.GetUsers() {
					want = append(want, u.GetId())
				}
				if got := rpcWalkUsers(t, c, q, whole.GetTotalCount()); !slices.Equal(got, want) {
					t.Fatalf("walked %v, want %v", got, want)
				}
			})
		}
	}
}

func TestRPCPostsPageByToken(t *testing.T) {
	s := startServer(t)
	c := s.RPCClient(apitest.RPCProtocols[0], apitest.Key)
	author := apitest.RPCCreate(t, c, "author", "")
	var want []int32
	for i := range 5 {
		res, err := c.CreateUserPost(t.Context(), &usersv1.CreateUserPostRequest{UserId: author.GetId(), Post: &usersv1.Post{Title: fmt.Sprint("post ", i)}})
		apitest.RPCMust(t, "CreateUserPost", err)
		want = append(want, res.GetPost().GetId())
	}
	for _, p := range apitest.RPCProtocols {
		req := &usersv1.ListUserPostsRequest{UserId: author.GetId(), Limit: 2}
		var got []int32
		for {
			res, err := s.RPCClient(p, "").ListUserPosts(t.Context(), req)
			apitest.RPCMust(t, p.Name+" ListUserPosts", err)
			for _, post := range res.GetPosts() {
				got = append(got, post.GetId())
			}
			if res.GetNextPageToken() == "" {
				break
			}
			req.PageToken = res.GetNextPageToken()
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: walked posts %v, want %v", p.Name, got, want)
		}
	}
}

func TestRPCRejectsBadPageTokens(t *testing.T) {
	s := startServer(t)
	c := s.RPCClient(apitest.RPCProtocols[0], apitest.Key)
	author := apitest.RPCCreate(t, c, "author", "")
	apitest.RPCCreate(t, c, "second", "")
	first, err := c.ListUsers(t.Context(), &usersv1.ListUsersRequest{Sort: "name", Limit: 1})
	apitest.RPCMust(t, "ListUsers", err)
	token := first.GetNextPageToken()
	if token == "" {
		t.Fatal("the first of two pages has no next_page_token")
	}
	cases := []struct {
		name string
		call func(usersv1connect.UsersClient) error
	}{
		{"a token with a page", func(c usersv1connect.UsersClient) error {
			_, err := c.ListUsers(t.Context(), &usersv1.ListUsersRequest{Sort: "name", Limit: 1, PageToken: token, Page: 2})
			return err
		}},
		{"a token with another sort", func(c usersv1connect.UsersClient) error {
			_, err := c.ListUsers(t.Context(), &usersv1.ListUsersRequest{Sort: "-name", Limit: 1, PageToken: token})
			return err
		}},
		{"a token with another limit", func(c usersv1connect.UsersClient) error {
			_, err := c.ListUsers(t.Context(), &usersv1.ListUsersRequest{Sort: "name", PageToken: token})
			return err
		}},
		{"a token with a name search", func(c usersv1connect.UsersClient) error {
			_, err := c.ListUsers(t.Context(), &usersv1.ListUsersRequest{Sort: "name", Limit: 1, NamePrefix: "s", PageToken: token})
			return err
		}},
		{"a users token for posts", func(c usersv1connect.UsersClient) error {
			_, err := c.ListUserPosts(t.Context(), &usersv1.ListUserPostsRequest{UserId: author.GetId(), Limit: 1, PageToken: token})
			return err
		}},
		{"a token that is not one", func(c usersv1connect.UsersClient) error {
			_, err := c.ListUsers(t.Context(), &usersv1.ListUsersRequest{PageToken: "%%%"})
			return err
		}},
		{"a name search with a control character", func(c usersv1connect.UsersClient) error {
			_, err := c.ListUsers(t.Context(), &usersv1.ListUsersRequest{NamePrefix: "a\x00"})
			return err
		}},
	}
	for _, p := range apitest.RPCProtocols {
		for _, tc := range cases {
			t.Run(p.Name+"/"+tc.name, func(t *testing.T) {
				apitest.RPCWantCode(t, tc.call(s.RPCClient(p, "")), connect.CodeInvalidArgument)
			})
		}
	}
}

func TestRPCPageTokenIsTheRESTCursor(t *testing.T) {
	s := startServer(t)
	c := s.RPCClient(apitest.RPCProtocolNamed(t, "Connect JSON"), apitest.Key)
	var ids []int
	for i := range 4 {
		ids = append(ids, int(apitest.RPCCreate(t, c, fmt.Sprint("user ", i), "").GetId()))
	}
	res, err := c.ListUsers(t.Context(), &usersv1.ListUsersRequest{Sort: "-createdAt", Limit: 2})
	apitest.RPCMust(t, "ListUsers", err)
	got, answer := s.listIDs(t, apitest.HTTP1Client, "/users?sort=-createdAt&limit=2&cursor="+url.QueryEscape(res.GetNextPageToken()))
	if want := []int{ids[1], ids[0]}; !slices.Equal(got, want) || linkTarget(t, answer.Header, "next") != "" {
		t.Fatalf("REST page after the RPC token: %v (Link %q), want %v and no next", got, answer.Header.Get("Link"), want)
	}
}
