package handlers

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"testing"

	"connectrpc.com/connect"

	usersv1 "usersd/gen/users/v1"
	"usersd/internal/apitest"
	"usersd/users"
)

// tokenForm is the form of every Consistency-Token the service issues.
var tokenForm = regexp.MustCompile(`^c1-[0-9a-f]+$`)

// malformedTokens are tokens that the service never issued, each refused.
var malformedTokens = []string{"bogus", "c1-", "c1-xyz", "c2-10", "c1-+10", "c1-0x10", "c1-10000000000000000", "c1-1 2"}

var jsonBody = map[string]string{"Content-Type": "application/json"}

func TestEveryRESTWriteAnswersAConsistencyToken(t *testing.T) {
	s := startServer(t)
	client := apitest.Transports[0].Client
	user := s.CreateUser(t, "ada", "")
	path := fmt.Sprintf("/users/%d", apitest.IDOf(t, user))
	writes := []request{
		{Method: "POST", Path: "/users", Body: `{"name":"grace"}`, Key: true, Header: jsonBody},
		{Method: "POST", Path: path + "/posts", Body: `{"title":"hello"}`, Key: true, Header: jsonBody},
		{Method: "PUT", Path: path, Body: `{"name":"ada lovelace"}`, Key: true, Header: jsonBody},
		{Method: "PATCH", Path: path, Body: `{"role":"admin"}`, Key: true, Header: map[string]string{"Content-Type": "application/merge-patch+json"}},
		{Method: "DELETE", Path: path, Key: true},
	}
	for _, w := range writes {
		res := s.Do(t, client, w)
		if res.Status/100 != 2 {
			t.Fatalf("%s %s: %d %s", w.Method, w.Path, res.Status, res.Body)
		}
		if token := res.Header.Get(users.ConsistencyTokenHeader); !tokenForm.MatchString(token) {
			t.Errorf("%s %s answered Consistency-Token %q", w.Method, w.Path, token)
		}
		// A read that sends it back is served.
		read := s.Do(t, client, request{Method: "GET", Path: "/users", Header: map[string]string{users.ConsistencyTokenHeader: res.Header.Get(users.ConsistencyTokenHeader)}})
		if read.Status != http.StatusOK {
			t.Errorf("a list with the token of %s %s: %d %s", w.Method, w.Path, read.Status, read.Body)
		}
	}
	// A write that fails answers no token: there is no write to read.
	failed := s.Do(t, client, request{Method: "DELETE", Path: path, Key: true})
	if failed.Status != http.StatusNotFound || failed.Header.Get(users.ConsistencyTokenHeader) != "" {
		t.Errorf("a failed delete: %d, Consistency-Token %q; want 404 and none", failed.Status, failed.Header.Get(users.ConsistencyTokenHeader))
	}
}

func TestAMalformedConsistencyTokenIsARESTClientError(t *testing.T) {
	s := startServer(t)
	client := apitest.Transports[0].Client
	user := s.CreateUser(t, "ada", "")
	path := fmt.Sprintf("/users/%d", apitest.IDOf(t, user))
	for _, token := range malformedTokens {
		for _, r := range []request{
			{Method: "GET", Path: "/users"},
			{Method: "GET", Path: path},
			{Method: "GET", Path: path + "/posts"},
			{Method: "POST", Path: "/users", Body: `{"name":"never"}`, Key: true, Header: map[string]string{"Content-Type": "application/json"}},
			{Method: "PATCH", Path: path, Body: `{"name":"never"}`, Key: true, Header: map[string]string{"Content-Type": "application/merge-patch+json"}},
		} {
			if r.Header == nil {
				r.Header = map[string]string{}
			}
			r.Header[users.ConsistencyTokenHeader] = token
			res := s.Do(t, client, r)
			if res.Status != http.StatusBadRequest {
				t.Errorf("%s %s with Consistency-Token %q: %d %s, want 400", r.Method, r.Path, token, res.Status, res.Body)
				continue
			}
			res.ErrorMessage(t)
		}
	}
	if n := apitest.UserCount(t, s.BaseURL); n != "1" {
		t.Fatalf("%s users after writes with malformed tokens, want 1", n)
	}
}

func TestEveryRPCWriteAnswersAConsistencyTokenAndEveryReadHonoursOne(t *testing.T) {
	for _, p := range apitest.RPCProtocols {
		t.Run(p.Name, func(t *testing.T) {
			s := startServer(t)
			c := s.RPCClient(p, apitest.Key)
			var token string
			// write calls an RPC that writes and returns the token it answered.
			write := func(name string, call func(ctx context.Context) error) {
				t.Helper()
				ctx, info := connect.NewClientContext(t.Context())
				apitest.RPCMust(t, name, call(ctx))
				token = info.ResponseHeader().Get(users.ConsistencyTokenHeader)
				if !tokenForm.MatchString(token) {
					t.Errorf("%s answered Consistency-Token %q", name, token)
				}
			}
			var id int32
			write("CreateUser", func(ctx context.Context) error {
				res, err := c.CreateUser(ctx, &usersv1.CreateUserRequest{User: &usersv1.User{Name: "ada"}})
				id = res.GetUser().GetId()
				return err
			})
			write("CreateUserPost", func(ctx context.Context) error {
				_, err := c.CreateUserPost(ctx, &usersv1.CreateUserPostRequest{UserId: id, Post: &usersv1.Post{Title: "hello"}})
				return err
			})
			write("ReplaceUser", func(ctx context.Context) error {
				_, err := c.ReplaceUser(ctx, &usersv1.ReplaceUserRequest{Id: id, User: &usersv1.User{Name: "ada lovelace"}})
				return err
			})
			// reads sends tok with each read RPC and returns the first error.
			reads := func(tok string) error {
				ctx, info := connect.NewClientContext(t.Context())
				info.RequestHeader().Set(users.ConsistencyTokenHeader, tok)
				if _, err := c.GetUser(ctx, &usersv1.GetUserRequest{Id: id}); err != nil {
					return err
				}
				if _, err := c.ListUsers(ctx, &usersv1.ListUsersRequest{}); err != nil {
					return err
				}
				_, err := c.ListUserPosts(ctx, &usersv1.ListUserPostsRequest{UserId: id})
				return err
			}
			apitest.RPCMust(t, "reads with the token of ReplaceUser", reads(token))
			for _, bad := range malformedTokens {
				err := reads(bad)
				apitest.RPCWantCode(t, err, connect.CodeInvalidArgument)
				apitest.RPCCheckMessage(t, err)
			}
			write("DeleteUser", func(ctx context.Context) error {
				_, err := c.DeleteUser(ctx, &usersv1.DeleteUserRequest{Id: id})
				return err
			})
			ctx, info := connect.NewClientContext(t.Context())
			_, err := c.DeleteUser(ctx, &usersv1.DeleteUserRequest{Id: id})
			apitest.RPCWantCode(t, err, connect.CodeNotFound)
			if got := info.ResponseHeader().Get(users.ConsistencyTokenHeader); got != "" {
				t.Errorf("a failed DeleteUser answered Consistency-Token %q", got)
			}
		})
	}
}
