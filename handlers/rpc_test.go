package handlers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"connectrpc.com/connect"
	"connectrpc.com/grpcreflect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	usersv1 "usersd/gen/users/v1"
	"usersd/gen/users/v1/usersv1connect"
	"usersd/internal/apitest"
)

// rpcWantOnlyTheSeed checks that the store holds exactly the seed user, unchanged, with no posts.
func rpcWantOnlyTheSeed(t *testing.T, c usersv1connect.UsersClient, seed *usersv1.User) {
	t.Helper()
	if got := apitest.RPCGet(t, c, seed.GetId()); !proto.Equal(got, seed) {
		t.Errorf("the seed user is now %v, want %v", got, seed)
	}
	users, err := c.ListUsers(t.Context(), &usersv1.ListUsersRequest{})
	apitest.RPCMust(t, "ListUsers", err)
	if users.GetTotalCount() != 1 {
		t.Errorf("%d users exist, want only the seed: %v", users.GetTotalCount(), users.GetUsers())
	}
	posts, err := c.ListUserPosts(t.Context(), &usersv1.ListUserPostsRequest{UserId: seed.GetId()})
	apitest.RPCMust(t, "ListUserPosts", err)
	if posts.GetTotalCount() != 0 {
		t.Errorf("the seed user has posts %v, want none", posts.GetPosts())
	}
}

var rpcEtagPattern = regexp.MustCompile(`^"[0-9]+"$`)

func TestRPCEveryMethodWorksOverEveryProtocol(t *testing.T) {
	for _, p := range apitest.RPCProtocols {
		t.Run(p.Name, func(t *testing.T) {
			s := startServer(t)
			c := s.RPCClient(p, apitest.Key)

			t.Run("CreateUser stores a user that GetUser then returns unchanged", func(t *testing.T) {
				created := apitest.RPCCreate(t, c, "Ada", "admin")
				if created.GetId() <= 0 || created.GetName() != "Ada" || created.GetRole() != "admin" {
					t.Fatalf("created %v", created)
				}
				if created.GetCreatedAt() == nil || created.GetUpdatedAt() == nil {
					t.Fatalf("created user %v lacks timestamps", created)
				}
				if !created.GetCreatedAt().AsTime().Equal(created.GetUpdatedAt().AsTime()) {
					t.Errorf("a new user has createdAt %v and updatedAt %v", created.GetCreatedAt().AsTime(), created.GetUpdatedAt().AsTime())
				}
				apitest.RPCWantEtag(t, created, 1)
				if got := apitest.RPCGet(t, c, created.GetId()); !proto.Equal(got, created) {
					t.Fatalf("GetUser returned %v, want %v", got, created)
				}
			})

			t.Run("CreateUser ignores output-only fields of the body", func(t *testing.T) {
				res, err := c.CreateUser(t.Context(), &usersv1.CreateUserRequest{User: &usersv1.User{
					Id: 9999, Name: "Out", Etag: `"77"`,
				}})
				apitest.RPCMust(t, "CreateUser", err)
				if res.GetUser().GetId() == 9999 {
					t.Errorf("the server took the id 9999 from the body")
				}
				apitest.RPCWantEtag(t, res.GetUser(), 1)
			})

			t.Run("ListUsers filters by role, sorts by -name and pages with the total count", func(t *testing.T) {
				for _, name := range []string{"ann", "eve", "bob", "dan", "cat"} {
					apitest.RPCCreate(t, c, name, "lister")
				}
				apitest.RPCCreate(t, c, "zed", "Lister") // the filter is case-sensitive
				apitest.RPCCreate(t, c, "yan", "")
				cases := []struct {
					page, limit int32
					want        []string
				}{
					{0, 0, []string{"eve", "dan", "cat", "bob", "ann"}},
					{1, 2, []string{"eve", "dan"}},
					{2, 2, []string{"cat", "bob"}},
					{3, 2, []string{"ann"}},
					{4, 2, []string{}},
				}
				for _, tc := range cases {
					res, err := c.ListUsers(t.Context(), &usersv1.ListUsersRequest{Role: "lister", Sort: "-name", Page: tc.page, Limit: tc.limit})
					apitest.RPCMust(t, "ListUsers", err)
					if got := apitest.RPCNames(res.GetUsers()); !slices.Equal(got, tc.want) {
						t.Errorf("page %d limit %d: got %q, want %q", tc.page, tc.limit, got, tc.want)
					}
					if res.GetTotalCount() != 5 {
						t.Errorf("page %d limit %d: total_count %d, want 5", tc.page, tc.limit, res.GetTotalCount())
					}
					for _, u := range res.GetUsers() {
						if u.GetRole() != "lister" || u.GetEtag() == "" || u.GetCreatedAt() == nil {
							t.Errorf("listed user %v is not a complete user of role lister", u)
						}
					}
				}
			})

			t.Run("ListUsers without a query lists every user by id with the total count", func(t *testing.T) {
				res, err := c.ListUsers(t.Context(), &usersv1.ListUsersRequest{Limit: 100})
				apitest.RPCMust(t, "ListUsers", err)
				if int(res.GetTotalCount()) != len(res.GetUsers()) || len(res.GetUsers()) < 2 {
					t.Fatalf("total_count %d for %d users", res.GetTotalCount(), len(res.GetUsers()))
				}
				if !slices.IsSortedFunc(res.GetUsers(), func(a, b *usersv1.User) int { return int(a.GetId() - b.GetId()) }) {
					t.Errorf("users are not by id ascending: %v", res.GetUsers())
				}
			})

			t.Run("ReplaceUser sets every field and clears a role left empty", func(t *testing.T) {
				u := apitest.RPCCreate(t, c, "Bea", "editor")
				res, err := c.ReplaceUser(t.Context(), &usersv1.ReplaceUserRequest{Id: u.GetId(), User: &usersv1.User{Name: "Beatrice"}})
				apitest.RPCMust(t, "ReplaceUser", err)
				got := res.GetUser()
				if got.GetId() != u.GetId() || got.GetName() != "Beatrice" || got.GetRole() != "" {
					t.Fatalf("replaced user is %v, want name Beatrice and no role", got)
				}
				if !got.GetCreatedAt().AsTime().Equal(u.GetCreatedAt().AsTime()) {
					t.Errorf("createdAt changed from %v to %v", u.GetCreatedAt().AsTime(), got.GetCreatedAt().AsTime())
				}
				if got.GetUpdatedAt().AsTime().Before(u.GetUpdatedAt().AsTime()) {
					t.Errorf("updatedAt went back from %v to %v", u.GetUpdatedAt().AsTime(), got.GetUpdatedAt().AsTime())
				}
				apitest.RPCWantEtag(t, got, 2)
				if read := apitest.RPCGet(t, c, u.GetId()); !proto.Equal(read, got) {
					t.Fatalf("GetUser after ReplaceUser returned %v, want %v", read, got)
				}
			})

			t.Run("ReplaceUser accepts user.id equal to id", func(t *testing.T) {
				u := apitest.RPCCreate(t, c, "Same", "x")
				res, err := c.ReplaceUser(t.Context(), &usersv1.ReplaceUserRequest{Id: u.GetId(), User: &usersv1.User{Id: u.GetId(), Name: "Same2", Role: "y"}})
				apitest.RPCMust(t, "ReplaceUser", err)
				if res.GetUser().GetName() != "Same2" || res.GetUser().GetRole() != "y" {
					t.Fatalf("replaced user is %v", res.GetUser())
				}
			})

			updates := []struct {
				name     string
				user     *usersv1.User
				mask     *fieldmaskpb.FieldMask
				wantName string
				wantRole string
				changed  bool
			}{
				{"UpdateUser with update_mask name sets the name and leaves the role",
					&usersv1.User{Name: "Cleo", Role: "ignored"}, &fieldmaskpb.FieldMask{Paths: []string{"name"}}, "Cleo", "viewer", true},
				{"UpdateUser with update_mask role and an empty role clears the role",
					&usersv1.User{Name: "ignored"}, &fieldmaskpb.FieldMask{Paths: []string{"role"}}, "Carl", "", true},
				{"UpdateUser with update_mask * sets every field",
					&usersv1.User{Name: "Cleo"}, &fieldmaskpb.FieldMask{Paths: []string{"*"}}, "Cleo", "", true},
				{"UpdateUser with output-only paths in update_mask ignores them",
					&usersv1.User{Name: "Cleo", Etag: `"9"`}, &fieldmaskpb.FieldMask{Paths: []string{"name", "etag", "created_at"}}, "Cleo", "viewer", true},
				{"UpdateUser without a mask sets only the populated name",
					&usersv1.User{Name: "Cleo"}, nil, "Cleo", "viewer", true},
				{"UpdateUser without a mask sets only the populated role",
					&usersv1.User{Role: "owner"}, nil, "Carl", "owner", true},
				{"UpdateUser with an empty mask changes nothing and keeps the etag",
					&usersv1.User{Name: "Cleo", Role: "owner"}, &fieldmaskpb.FieldMask{}, "Carl", "viewer", false},
				{"UpdateUser without a mask and without a user changes nothing and keeps the etag",
					nil, nil, "Carl", "viewer", false},
			}
			for _, tc := range updates {
				if p.Name == "Connect JSON" && slices.Contains(tc.mask.GetPaths(), "*") {
					// protojson cannot marshal the path "*" (it is not a field name), so a Connect JSON
					// client cannot send it; TestRPCConnectJSONAcceptsTheWildcardMask sends it by hand.
					continue
				}
				t.Run(tc.name, func(t *testing.T) {
					u := apitest.RPCCreate(t, c, "Carl", "viewer")
					res, err := c.UpdateUser(t.Context(), &usersv1.UpdateUserRequest{Id: u.GetId(), User: tc.user, UpdateMask: tc.mask})
					apitest.RPCMust(t, "UpdateUser", err)
					got := res.GetUser()
					if got.GetName() != tc.wantName || got.GetRole() != tc.wantRole {
						t.Fatalf("updated user is %v, want name %q role %q", got, tc.wantName, tc.wantRole)
					}
					if tc.changed {
						apitest.RPCWantEtag(t, got, 2)
					} else if !proto.Equal(got, u) {
						t.Fatalf("an update that changes nothing returned %v, want the user unchanged %v", got, u)
					}
					if read := apitest.RPCGet(t, c, u.GetId()); !proto.Equal(read, got) {
						t.Fatalf("GetUser after UpdateUser returned %v, want %v", read, got)
					}
				})
			}

			t.Run("every write changes the etag, which is the quoted version number", func(t *testing.T) {
				u := apitest.RPCCreate(t, c, "Eli", "a")
				apitest.RPCWantEtag(t, u, 1)
				seen := map[string]bool{u.GetEtag(): true}
				writes := []func() (*usersv1.User, error){
					func() (*usersv1.User, error) {
						r, err := c.ReplaceUser(t.Context(), &usersv1.ReplaceUserRequest{Id: u.GetId(), User: &usersv1.User{Name: "Eli", Role: "b"}})
						return r.GetUser(), err
					},
					func() (*usersv1.User, error) {
						r, err := c.UpdateUser(t.Context(), &usersv1.UpdateUserRequest{Id: u.GetId(), User: &usersv1.User{Role: "c"}})
						return r.GetUser(), err
					},
					// Writing the same values is still a write.
					func() (*usersv1.User, error) {
						r, err := c.ReplaceUser(t.Context(), &usersv1.ReplaceUserRequest{Id: u.GetId(), User: &usersv1.User{Name: "Eli", Role: "c"}})
						return r.GetUser(), err
					},
					func() (*usersv1.User, error) {
						r, err := c.UpdateUser(t.Context(), &usersv1.UpdateUserRequest{Id: u.GetId(), User: &usersv1.User{Name: "Eli"},
							UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"name"}}})
						return r.GetUser(), err
					},
				}
				for i, write := range writes {
					got, err := write()
					apitest.RPCMust(t, fmt.Sprintf("write %d", i+1), err)
					if !rpcEtagPattern.MatchString(got.GetEtag()) || seen[got.GetEtag()] {
						t.Fatalf("write %d: etag %s is not a new quoted number (seen %v)", i+1, got.GetEtag(), seen)
					}
					seen[got.GetEtag()] = true
					apitest.RPCWantEtag(t, got, i+2)
					if read := apitest.RPCGet(t, c, u.GetId()); read.GetEtag() != got.GetEtag() {
						t.Fatalf("write %d returned etag %s but GetUser says %s", i+1, got.GetEtag(), read.GetEtag())
					}
				}
			})

			t.Run("DeleteUser removes the user and its posts, and a second delete is not_found", func(t *testing.T) {
				u := apitest.RPCCreate(t, c, "Dora", "")
				_, err := c.CreateUserPost(t.Context(), &usersv1.CreateUserPostRequest{UserId: u.GetId(), Post: &usersv1.Post{Title: "bye"}})
				apitest.RPCMust(t, "CreateUserPost", err)
				res, err := c.DeleteUser(t.Context(), &usersv1.DeleteUserRequest{Id: u.GetId()})
				apitest.RPCMust(t, "DeleteUser", err)
				if res == nil {
					t.Fatal("DeleteUser returned no response message")
				}
				_, err = c.GetUser(t.Context(), &usersv1.GetUserRequest{Id: u.GetId()})
				apitest.RPCWantCode(t, err, connect.CodeNotFound)
				_, err = c.ListUserPosts(t.Context(), &usersv1.ListUserPostsRequest{UserId: u.GetId()})
				apitest.RPCWantCode(t, err, connect.CodeNotFound)
				_, err = c.DeleteUser(t.Context(), &usersv1.DeleteUserRequest{Id: u.GetId()})
				apitest.RPCWantCode(t, err, connect.CodeNotFound)
			})

			t.Run("CreateUserPost adds posts that ListUserPosts lists by id with the total count", func(t *testing.T) {
				u := apitest.RPCCreate(t, c, "Finn", "")
				other := apitest.RPCCreate(t, c, "Gus", "")
				_, err := c.CreateUserPost(t.Context(), &usersv1.CreateUserPostRequest{UserId: other.GetId(), Post: &usersv1.Post{Title: "not Finn's"}})
				apitest.RPCMust(t, "CreateUserPost for another user", err)
				var created []*usersv1.Post
				for i, title := range []string{"one", "two", "three"} {
					post := &usersv1.Post{Title: title, Body: "line 1\nline 2"}
					if i == 1 {
						post.UserId = u.GetId() // equal to user_id: allowed
					}
					res, err := c.CreateUserPost(t.Context(), &usersv1.CreateUserPostRequest{UserId: u.GetId(), Post: post})
					apitest.RPCMust(t, "CreateUserPost "+title, err)
					p := res.GetPost()
					if p.GetId() <= 0 || p.GetUserId() != u.GetId() || p.GetTitle() != title || p.GetBody() != post.GetBody() || p.GetCreatedAt() == nil {
						t.Fatalf("created post %v", p)
					}
					created = append(created, p)
				}
				all, err := c.ListUserPosts(t.Context(), &usersv1.ListUserPostsRequest{UserId: u.GetId()})
				apitest.RPCMust(t, "ListUserPosts", err)
				if all.GetTotalCount() != 3 || len(all.GetPosts()) != 3 {
					t.Fatalf("ListUserPosts: %d posts, total_count %d; want 3 and 3", len(all.GetPosts()), all.GetTotalCount())
				}
				for i, p := range all.GetPosts() {
					if !proto.Equal(p, created[i]) {
						t.Errorf("post %d is %v, want %v (by id ascending)", i, p, created[i])
					}
				}
				page2, err := c.ListUserPosts(t.Context(), &usersv1.ListUserPostsRequest{UserId: u.GetId(), Page: 2, Limit: 2})
				apitest.RPCMust(t, "ListUserPosts page 2", err)
				if page2.GetTotalCount() != 3 || len(page2.GetPosts()) != 1 || !proto.Equal(page2.GetPosts()[0], created[2]) {
					t.Fatalf("page 2 of 2: %v, total_count %d; want only %v and 3", page2.GetPosts(), page2.GetTotalCount(), created[2])
				}
			})

			t.Run("ListUserPosts of a user without posts is empty with total count 0", func(t *testing.T) {
				u := apitest.RPCCreate(t, c, "Hal", "")
				res, err := c.ListUserPosts(t.Context(), &usersv1.ListUserPostsRequest{UserId: u.GetId()})
				apitest.RPCMust(t, "ListUserPosts", err)
				if len(res.GetPosts()) != 0 || res.GetTotalCount() != 0 {
					t.Fatalf("got %v, total_count %d", res.GetPosts(), res.GetTotalCount())
				}
			})

			t.Run("ListUserPosts and CreateUserPost of a missing user are not_found", func(t *testing.T) {
				_, err := c.ListUserPosts(t.Context(), &usersv1.ListUserPostsRequest{UserId: 987654})
				apitest.RPCWantCode(t, err, connect.CodeNotFound)
				_, err = c.CreateUserPost(t.Context(), &usersv1.CreateUserPostRequest{UserId: 987654, Post: &usersv1.Post{Title: "t"}})
				apitest.RPCWantCode(t, err, connect.CodeNotFound)
			})
		})
	}
}

// rpcTooLargeName is a name that makes a request message larger than the 1 MiB limit.
var rpcTooLargeName = strings.Repeat("n", 1_100_000)

func TestRPCErrorCodesOverEveryProtocol(t *testing.T) {
	for _, p := range apitest.RPCProtocols {
		t.Run(p.Name, func(t *testing.T) {
			s := startServer(t)
			c := s.RPCClient(p, apitest.Key)
			seed := apitest.RPCCreate(t, c, "Seed", "keeper")
			id := seed.GetId()
			const missing = 424242
			cases := []struct {
				name string
				call func(ctx context.Context) error
				want connect.Code
			}{
				{"GetUser with id 0 is invalid_argument", func(ctx context.Context) error {
					_, err := c.GetUser(ctx, &usersv1.GetUserRequest{Id: 0})
					return err
				}, connect.CodeInvalidArgument},
				{"GetUser with a negative id is invalid_argument", func(ctx context.Context) error {
					_, err := c.GetUser(ctx, &usersv1.GetUserRequest{Id: -1})
					return err
				}, connect.CodeInvalidArgument},
				{"GetUser of a missing user is not_found", func(ctx context.Context) error {
					_, err := c.GetUser(ctx, &usersv1.GetUserRequest{Id: missing})
					return err
				}, connect.CodeNotFound},
				{"CreateUser without a name is invalid_argument", func(ctx context.Context) error {
					_, err := c.CreateUser(ctx, &usersv1.CreateUserRequest{User: &usersv1.User{Role: "r"}})
					return err
				}, connect.CodeInvalidArgument},
				{"CreateUser with a blank name is invalid_argument", func(ctx context.Context) error {
					_, err := c.CreateUser(ctx, &usersv1.CreateUserRequest{User: &usersv1.User{Name: "   "}})
					return err
				}, connect.CodeInvalidArgument},
				{"CreateUser without a user is invalid_argument", func(ctx context.Context) error {
					_, err := c.CreateUser(ctx, &usersv1.CreateUserRequest{})
					return err
				}, connect.CodeInvalidArgument},
				{"ListUsers with an unknown sort attribute is invalid_argument", func(ctx context.Context) error {
					_, err := c.ListUsers(ctx, &usersv1.ListUsersRequest{Sort: "age"})
					return err
				}, connect.CodeInvalidArgument},
				{"ListUsers with a negative page is invalid_argument", func(ctx context.Context) error {
					_, err := c.ListUsers(ctx, &usersv1.ListUsersRequest{Page: -1})
					return err
				}, connect.CodeInvalidArgument},
				{"ReplaceUser with id 0 is invalid_argument", func(ctx context.Context) error {
					_, err := c.ReplaceUser(ctx, &usersv1.ReplaceUserRequest{User: &usersv1.User{Name: "x"}})
					return err
				}, connect.CodeInvalidArgument},
				{"ReplaceUser without a name is invalid_argument", func(ctx context.Context) error {
					_, err := c.ReplaceUser(ctx, &usersv1.ReplaceUserRequest{Id: id, User: &usersv1.User{Role: "r"}})
					return err
				}, connect.CodeInvalidArgument},
				{"ReplaceUser with a user.id other than id is invalid_argument", func(ctx context.Context) error {
					_, err := c.ReplaceUser(ctx, &usersv1.ReplaceUserRequest{Id: id, User: &usersv1.User{Id: id + 1, Name: "x"}})
					return err
				}, connect.CodeInvalidArgument},
				{"ReplaceUser of a missing user is not_found", func(ctx context.Context) error {
					_, err := c.ReplaceUser(ctx, &usersv1.ReplaceUserRequest{Id: missing, User: &usersv1.User{Name: "x"}})
					return err
				}, connect.CodeNotFound},
				{"UpdateUser with an unknown update_mask path is invalid_argument", func(ctx context.Context) error {
					_, err := c.UpdateUser(ctx, &usersv1.UpdateUserRequest{Id: id, User: &usersv1.User{Name: "x"},
						UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"name", "nickname"}}})
					return err
				}, connect.CodeInvalidArgument},
				{"UpdateUser with a user.id other than id is invalid_argument", func(ctx context.Context) error {
					_, err := c.UpdateUser(ctx, &usersv1.UpdateUserRequest{Id: id, User: &usersv1.User{Id: id + 1, Name: "x"}})
					return err
				}, connect.CodeInvalidArgument},
				{"UpdateUser that empties the name is invalid_argument", func(ctx context.Context) error {
					_, err := c.UpdateUser(ctx, &usersv1.UpdateUserRequest{Id: id, User: &usersv1.User{},
						UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"name"}}})
					return err
				}, connect.CodeInvalidArgument},
				{"UpdateUser of a missing user is not_found", func(ctx context.Context) error {
					_, err := c.UpdateUser(ctx, &usersv1.UpdateUserRequest{Id: missing, User: &usersv1.User{Name: "x"}})
					return err
				}, connect.CodeNotFound},
				{"DeleteUser with id 0 is invalid_argument", func(ctx context.Context) error {
					_, err := c.DeleteUser(ctx, &usersv1.DeleteUserRequest{})
					return err
				}, connect.CodeInvalidArgument},
				{"DeleteUser of a missing user is not_found", func(ctx context.Context) error {
					_, err := c.DeleteUser(ctx, &usersv1.DeleteUserRequest{Id: missing})
					return err
				}, connect.CodeNotFound},
				{"ListUserPosts with user_id 0 is invalid_argument", func(ctx context.Context) error {
					_, err := c.ListUserPosts(ctx, &usersv1.ListUserPostsRequest{})
					return err
				}, connect.CodeInvalidArgument},
				{"CreateUserPost without a title is invalid_argument", func(ctx context.Context) error {
					_, err := c.CreateUserPost(ctx, &usersv1.CreateUserPostRequest{UserId: id, Post: &usersv1.Post{Body: "b"}})
					return err
				}, connect.CodeInvalidArgument},
				{"CreateUserPost with a post.user_id other than user_id is invalid_argument", func(ctx context.Context) error {
					_, err := c.CreateUserPost(ctx, &usersv1.CreateUserPostRequest{UserId: id, Post: &usersv1.Post{UserId: id + 1, Title: "t"}})
					return err
				}, connect.CodeInvalidArgument},
				{"CreateUser with a request message over 1 MiB is resource_exhausted", func(ctx context.Context) error {
					_, err := c.CreateUser(ctx, &usersv1.CreateUserRequest{User: &usersv1.User{Name: rpcTooLargeName}})
					return err
				}, connect.CodeResourceExhausted},
				{"ReplaceUser with a request message over 1 MiB is resource_exhausted", func(ctx context.Context) error {
					_, err := c.ReplaceUser(ctx, &usersv1.ReplaceUserRequest{Id: id, User: &usersv1.User{Name: rpcTooLargeName}})
					return err
				}, connect.CodeResourceExhausted},
			}
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					apitest.RPCWantCode(t, tc.call(t.Context()), tc.want)
				})
			}

			t.Run("none of the refused writes changed anything", func(t *testing.T) {
				rpcWantOnlyTheSeed(t, c, seed)
			})
		})
	}
}

func TestRPCWritesWithoutAValidKeyAreUnauthenticated(t *testing.T) {
	keys := []struct {
		name, key string
	}{
		{"without a key", ""},
		{"with a wrong key", "wrong-" + apitest.Key},
		{"with a prefix of the key", apitest.Key[:len(apitest.Key)-1]},
	}
	for _, p := range apitest.RPCProtocols {
		t.Run(p.Name, func(t *testing.T) {
			s := startServer(t)
			seed := apitest.RPCCreate(t, s.RPCClient(p, apitest.Key), "Seed", "keeper")
			id := seed.GetId()
			for _, k := range keys {
				c := s.RPCClient(p, k.key)
				writes := []struct {
					name string
					call func(ctx context.Context) error
				}{
					{"CreateUser", func(ctx context.Context) error {
						_, err := c.CreateUser(ctx, &usersv1.CreateUserRequest{User: &usersv1.User{Name: "Intruder"}})
						return err
					}},
					{"CreateUser with a request message over 1 MiB", func(ctx context.Context) error {
						_, err := c.CreateUser(ctx, &usersv1.CreateUserRequest{User: &usersv1.User{Name: rpcTooLargeName}})
						return err
					}},
					{"CreateUser with an invalid body", func(ctx context.Context) error {
						_, err := c.CreateUser(ctx, &usersv1.CreateUserRequest{})
						return err
					}},
					{"ReplaceUser", func(ctx context.Context) error {
						_, err := c.ReplaceUser(ctx, &usersv1.ReplaceUserRequest{Id: id, User: &usersv1.User{Name: "Intruder"}})
						return err
					}},
					{"UpdateUser", func(ctx context.Context) error {
						_, err := c.UpdateUser(ctx, &usersv1.UpdateUserRequest{Id: id, User: &usersv1.User{Role: "intruder"}})
						return err
					}},
					{"DeleteUser", func(ctx context.Context) error {
						_, err := c.DeleteUser(ctx, &usersv1.DeleteUserRequest{Id: id})
						return err
					}},
					{"CreateUserPost", func(ctx context.Context) error {
						_, err := c.CreateUserPost(ctx, &usersv1.CreateUserPostRequest{UserId: id, Post: &usersv1.Post{Title: "spam"}})
						return err
					}},
				}
				for _, w := range writes {
					t.Run(w.name+" "+k.name+" is unauthenticated and changes nothing", func(t *testing.T) {
						apitest.RPCWantCode(t, w.call(t.Context()), connect.CodeUnauthenticated)
						// Reads are public, so the same keyless client checks that nothing changed.
						rpcWantOnlyTheSeed(t, c, seed)
					})
				}
			}
		})
	}
}

// rpcRecordingClient is an HTTP client that remembers the method and path of every request it sends.
type rpcRecordingClient struct {
	mu   sync.Mutex
	sent []string
}

func (r *rpcRecordingClient) Do(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	r.sent = append(r.sent, req.Method+" "+req.URL.Path)
	r.mu.Unlock()
	return apitest.H2CClient.Do(req)
}

func (r *rpcRecordingClient) requests() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.sent)
}

func TestRPCConnectGetReadsWithoutSideEffects(t *testing.T) {
	s := startServer(t)
	created := s.CreateUser(t, "Gina", "reader")
	id := int32(created["id"].(float64))
	rest := s.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: fmt.Sprintf("/users/%d", id)})
	if rest.Status != http.StatusOK {
		t.Fatalf("GET /users/%d: %d %s", id, rest.Status, rest.Body)
	}

	t.Run("a Connect JSON client with HTTP GET reads GetUser and ListUsers over GET", func(t *testing.T) {
		recorder := &rpcRecordingClient{}
		c := usersv1connect.NewUsersClient(recorder, s.BaseURL, connect.WithHTTPGet(), connect.WithProtoJSON())
		got, err := c.GetUser(t.Context(), &usersv1.GetUserRequest{Id: id})
		apitest.RPCMust(t, "GetUser", err)
		want := &usersv1.User{}
		if err := protojson.Unmarshal(rest.Body, want); err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(got, want) {
			t.Errorf("GetUser over GET returned %v, want %v", got, want)
		}
		list, err := c.ListUsers(t.Context(), &usersv1.ListUsersRequest{Role: "reader"})
		apitest.RPCMust(t, "ListUsers", err)
		if list.GetTotalCount() != 1 || len(list.GetUsers()) != 1 || !proto.Equal(list.GetUsers()[0], want) {
			t.Errorf("ListUsers over GET returned %v", list)
		}
		_, err = c.GetUser(t.Context(), &usersv1.GetUserRequest{Id: 0})
		apitest.RPCWantCode(t, err, connect.CodeInvalidArgument)
		wantSent := []string{"GET /users.v1.Users/GetUser", "GET /users.v1.Users/ListUsers", "GET /users.v1.Users/GetUser"}
		if got := recorder.requests(); !slices.Equal(got, wantSent) {
			t.Errorf("the client sent %q, want %q", got, wantSent)
		}
	})

	t.Run("a raw HTTP GET with the message in the query answers 200 with the user", func(t *testing.T) {
		for _, tr := range apitest.Transports {
			path := "/users.v1.Users/GetUser?connect=v1&encoding=json&message=" + url.QueryEscape(fmt.Sprintf(`{"id":%d}`, id))
			res := s.Do(t, tr.Client, request{Method: "GET", Path: path})
			if res.Status != http.StatusOK {
				t.Fatalf("%s: GET %s: %d %s", tr.Name, path, res.Status, res.Body)
			}
			if !bytes.Equal(res.Body, rest.Body) {
				t.Errorf("%s: Connect GET body %s differs from the REST body %s", tr.Name, res.Body, rest.Body)
			}
		}
	})

	t.Run("a raw HTTP GET of a missing user answers not_found", func(t *testing.T) {
		path := "/users.v1.Users/GetUser?connect=v1&encoding=json&message=" + url.QueryEscape(`{"id":999999}`)
		res := s.Do(t, apitest.H2CClient, request{Method: "GET", Path: path})
		if res.Status != http.StatusNotFound || rpcConnectErrorCode(t, res.Body) != "not_found" {
			t.Fatalf("GET %s: %d %s, want 404 not_found", path, res.Status, res.Body)
		}
	})
}

// rpcConnectErrorCode returns the code of a Connect error body {"code": ..., "message": ...} and
// checks that its message leaks nothing.
func rpcConnectErrorCode(t *testing.T, body []byte) string {
	t.Helper()
	code, message := apitest.ConnectErrorBody(t, body)
	for _, w := range apitest.RPCLeakWords {
		if strings.Contains(strings.ToLower(message), w) {
			t.Errorf("error message %q contains %q", message, w)
		}
	}
	return code
}

func TestRPCUserIsTheSameOnEveryProtocol(t *testing.T) {
	s := startServer(t)
	created := s.CreateUser(t, "Hélène \"Q\" <&>", "ops/eu")
	id := int(created["id"].(float64))

	restRes := s.Do(t, apitest.H2CClient, request{Method: "GET", Path: fmt.Sprintf("/users/%d", id)})
	if restRes.Status != http.StatusOK {
		t.Fatalf("REST GET: %d %s", restRes.Status, restRes.Body)
	}
	fromREST := &usersv1.User{}
	if err := protojson.Unmarshal(restRes.Body, fromREST); err != nil {
		t.Fatalf("the REST body %s is not a User: %v", restRes.Body, err)
	}

	t.Run("Connect JSON answers the same bytes as REST", func(t *testing.T) {
		for _, tr := range apitest.Transports {
			res := s.Do(t, tr.Client, request{Method: "POST", Path: "/users.v1.Users/GetUser", Header: apitest.JSONBody, Body: fmt.Sprintf(`{"id":%d}`, id)})
			if res.Status != http.StatusOK {
				t.Fatalf("%s: POST /users.v1.Users/GetUser: %d %s", tr.Name, res.Status, res.Body)
			}
			if !bytes.Equal(res.Body, restRes.Body) {
				t.Errorf("%s: Connect JSON body\n%s\ndiffers from the REST body\n%s", tr.Name, res.Body, restRes.Body)
			}
		}
	})

	for _, p := range apitest.RPCProtocols {
		t.Run(p.Name+" answers a message equal to the REST body", func(t *testing.T) {
			got := apitest.RPCGet(t, s.RPCClient(p, ""), int32(id))
			if !proto.Equal(got, fromREST) {
				t.Errorf("%s returned %v, REST %v", p.Name, got, fromREST)
			}
		})
	}

	t.Run("a user created over RPC reads the same over REST", func(t *testing.T) {
		u := apitest.RPCCreate(t, s.RPCClient(apitest.RPCProtocolNamed(t, "gRPC"), apitest.Key), "Ivo", "")
		res := s.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: fmt.Sprintf("/users/%d", u.GetId())})
		fromREST := &usersv1.User{}
		if err := protojson.Unmarshal(res.Body, fromREST); err != nil {
			t.Fatalf("REST GET: %d %s: %v", res.Status, res.Body, err)
		}
		if !proto.Equal(u, fromREST) {
			t.Errorf("gRPC created %v, REST reads %v", u, fromREST)
		}
	})
}

func TestRPCConnectJSONRejectsUnknownFields(t *testing.T) {
	s := startServer(t)
	cases := []struct {
		name, path, body string
	}{
		{"CreateUser with a misspelt field in user is invalid_argument", "/users.v1.Users/CreateUser", `{"user":{"name":"x","nmae":"y"}}`},
		{"CreateUser with an unknown top-level field is invalid_argument", "/users.v1.Users/CreateUser", `{"user":{"name":"x"},"extra":1}`},
		{"GetUser with an unknown field is invalid_argument", "/users.v1.Users/GetUser", `{"id":1,"idd":2}`},
		{"CreateUser with a wrong field type is invalid_argument", "/users.v1.Users/CreateUser", `{"user":{"name":5}}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := s.Do(t, apitest.H2CClient, request{Method: "POST", Path: tc.path, Header: apitest.JSONBody, Body: tc.body, Key: true})
			if res.Status != http.StatusBadRequest {
				t.Fatalf("POST %s %s: %d %s, want 400", tc.path, tc.body, res.Status, res.Body)
			}
			if code := rpcConnectErrorCode(t, res.Body); code != "invalid_argument" {
				t.Fatalf("code %q, want invalid_argument (body %s)", code, res.Body)
			}
		})
	}
	t.Run("no user was created by the rejected requests", func(t *testing.T) {
		list, err := s.RPCClient(apitest.RPCProtocolNamed(t, "Connect binary"), "").ListUsers(t.Context(), &usersv1.ListUsersRequest{})
		apitest.RPCMust(t, "ListUsers", err)
		if list.GetTotalCount() != 0 {
			t.Fatalf("%d users exist: %v", list.GetTotalCount(), list.GetUsers())
		}
	})
}

// The JSON form of google.protobuf.FieldMask cannot carry "*" (protojson rejects it on both sides), so
// over JSON a client names every field instead; "*" works on the binary protocols.
func TestRPCConnectJSONNamesEveryFieldInsteadOfTheWildcardMask(t *testing.T) {
	s := startServer(t)
	id := apitest.IDOf(t, s.CreateUser(t, "Jo", "lead"))
	wildcard := fmt.Sprintf(`{"id":%d,"user":{"name":"Joan"},"updateMask":"*"}`, id)
	res := s.Do(t, apitest.H2CClient, request{Method: "POST", Path: "/users.v1.Users/UpdateUser", Header: apitest.JSONBody, Body: wildcard, Key: true})
	if code := rpcConnectErrorCode(t, res.Body); res.Status != http.StatusBadRequest || code != "invalid_argument" {
		t.Fatalf("wildcard mask over JSON: %d %s, want 400 invalid_argument", res.Status, res.Body)
	}
	every := fmt.Sprintf(`{"id":%d,"user":{"name":"Joan"},"updateMask":"name,role"}`, id)
	res = s.Do(t, apitest.H2CClient, request{Method: "POST", Path: "/users.v1.Users/UpdateUser", Header: apitest.JSONBody, Body: every, Key: true})
	got := &usersv1.UpdateUserResponse{}
	if err := protojson.Unmarshal(res.Body, got); res.Status != http.StatusOK || err != nil {
		t.Fatalf("mask name,role over JSON: %d %s", res.Status, res.Body)
	}
	if got.GetUser().GetName() != "Joan" || got.GetUser().GetRole() != "" {
		t.Fatalf(`update_mask "name,role" with only a name gave %v, want name Joan and the role cleared`, got.GetUser())
	}
}

func TestRPCReflectionListsTheServices(t *testing.T) {
	s := startServer(t)
	want := []string{"users.v1.Users", "grpc.health.v1.Health"}

	t.Run("the grpcreflect client lists both services over v1", func(t *testing.T) {
		client := grpcreflect.NewClient(apitest.H2CClient, s.BaseURL)
		stream := client.NewStream(t.Context())
		t.Cleanup(func() { _, _ = stream.Close() })
		services, err := stream.ListServices()
		apitest.RPCMust(t, "ListServices", err)
		for _, name := range want {
			if !slices.Contains(services, protoreflect.FullName(name)) {
				t.Errorf("ListServices returned %v, without %s", services, name)
			}
		}
		if got := stream.Spec().Procedure; got != "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo" {
			t.Errorf("the client used %s, want v1", got)
		}
	})

	// What grpcurl needs to call or describe a listed service without proto files.
	for _, service := range want {
		t.Run("the grpcreflect client describes "+service, func(t *testing.T) {
			stream := grpcreflect.NewClient(apitest.H2CClient, s.BaseURL).NewStream(t.Context())
			t.Cleanup(func() { _, _ = stream.Close() })
			files, err := stream.FileContainingSymbol(protoreflect.FullName(service))
			apitest.RPCMust(t, "FileContainingSymbol("+service+")", err)
			for _, f := range files {
				t.Logf("file %s, package %s", f.GetName(), f.GetPackage())
			}
			if !slices.ContainsFunc(files, func(f *descriptorpb.FileDescriptorProto) bool { return rpcDeclaresService(f, service) }) {
				names := make([]string, len(files))
				for i, f := range files {
					names[i] = f.GetName()
				}
				t.Errorf("FileContainingSymbol(%s) returned files %q, none of which declares it", service, names)
			}
		})
	}

	// grpcreflect's client only falls back to v1alpha when v1 answers unimplemented, and its message
	// types are internal to the module, so v1alpha is called here by hand: a gRPC-framed
	// ServerReflectionRequest{list_services: ""} built with protowire.
	t.Run("a raw gRPC call to v1alpha lists both services with grpc-status 0", func(t *testing.T) {
		var msg []byte
		msg = protowire.AppendTag(msg, 7, protowire.BytesType) // list_services
		msg = protowire.AppendString(msg, "")
		answers := apitest.RawGRPC(t, s.BaseURL, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", msg)
		services := rpcReflectionServices(t, answers)
		for _, name := range want {
			if !slices.Contains(services, name) {
				t.Errorf("v1alpha listed %q, without %s", services, name)
			}
		}
	})
}

// rpcDeclaresService reports whether the file f declares the service of the full name service.
func rpcDeclaresService(f *descriptorpb.FileDescriptorProto, service string) bool {
	for _, sd := range f.GetService() {
		if f.GetPackage()+"."+sd.GetName() == service {
			return true
		}
	}
	return false
}

// rpcReflectionServices decodes ServerReflectionResponses and returns the service names of their
// list_services_response; an error_response fails the test.
func rpcReflectionServices(t *testing.T, answers [][]byte) []string {
	t.Helper()
	var names []string
	for _, msg := range answers {
		rpcEachField(t, msg, func(num protowire.Number, value []byte) {
			switch num {
			case 7: // error_response
				t.Fatalf("v1alpha answered an error_response % x", value)
			case 6: // list_services_response
				rpcEachField(t, value, func(num protowire.Number, service []byte) {
					if num != 1 { // service
						return
					}
					rpcEachField(t, service, func(num protowire.Number, name []byte) {
						if num == 1 { // name
							names = append(names, string(name))
						}
					})
				})
			}
		})
	}
	if len(names) == 0 {
		t.Fatal("no list_services_response in the answer")
	}
	return names
}

// rpcEachField calls fn with every length-delimited field of msg and skips the others.
func rpcEachField(t *testing.T, msg []byte, fn func(protowire.Number, []byte)) {
	t.Helper()
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			t.Fatalf("bad tag: %v", protowire.ParseError(n))
		}
		msg = msg[n:]
		if typ != protowire.BytesType {
			n = protowire.ConsumeFieldValue(num, typ, msg)
			if n < 0 {
				t.Fatalf("bad field %d: %v", num, protowire.ParseError(n))
			}
			msg = msg[n:]
			continue
		}
		value, n := protowire.ConsumeBytes(msg)
		if n < 0 {
			t.Fatalf("bad field %d: %v", num, protowire.ParseError(n))
		}
		msg = msg[n:]
		fn(num, value)
	}
}

func TestRPCHealthCheck(t *testing.T) {
	s := startServer(t)
	for _, service := range []string{"", "users.v1.Users"} {
		t.Run(fmt.Sprintf("a raw gRPC Check of service %q answers status SERVING (1)", service), func(t *testing.T) {
			if status := apitest.GRPCHealthStatus(t, s.BaseURL, service); status != 1 {
				t.Fatalf("status %d, want SERVING (1)", status)
			}
		})
	}
	cases := []struct {
		name, body string
		status     int
		want       map[string]any // the answer, or nil for an error
		code       string
	}{
		// The messages are grpc.health.v1's own, so JSON spells the status as gRPC's health.proto does.
		{"Connect JSON says the server as a whole is serving", `{}`, http.StatusOK, map[string]any{"status": "SERVING"}, ""},
		{"Connect JSON says users.v1.Users is serving", `{"service":"users.v1.Users"}`, http.StatusOK, map[string]any{"status": "SERVING"}, ""},
		{"Connect JSON says an unknown service is not_found", `{"service":"nope"}`, http.StatusNotFound, nil, "not_found"},
		{"Connect JSON rejects an unknown field as invalid_argument", `{"servic":"users.v1.Users"}`, http.StatusBadRequest, nil, "invalid_argument"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := s.Do(t, apitest.H2CClient, request{Method: "POST", Path: "/grpc.health.v1.Health/Check", Header: apitest.JSONBody, Body: tc.body})
			if res.Status != tc.status {
				t.Fatalf("Check %s: %d %s, want %d", tc.body, res.Status, res.Body, tc.status)
			}
			if tc.want == nil {
				if code := rpcConnectErrorCode(t, res.Body); code != tc.code {
					t.Fatalf("Check %s: code %q, want %q", tc.body, code, tc.code)
				}
				return
			}
			if got := apitest.DecodeObject(t, res.Body); !maps.Equal(got, tc.want) {
				t.Fatalf("Check %s answered %s, want %v", tc.body, res.Body, tc.want)
			}
		})
	}
}

// A refusal must come in the caller's own RPC protocol (for gRPC: HTTP 200 with grpc-status), not as
// REST JSON. connect clients map a bare HTTP 401 to unauthenticated too, so the code alone cannot tell;
// the service's own message, which only an RPC-shaped error carries, can.
func TestRPCRefusalsComeInTheCallersProtocol(t *testing.T) {
	s := startServer(t)
	for _, p := range apitest.RPCProtocols {
		t.Run(p.Name, func(t *testing.T) {
			_, err := s.RPCClient(p, "").CreateUser(t.Context(), &usersv1.CreateUserRequest{User: &usersv1.User{Name: "x"}})
			var ce *connect.Error
			if !errors.As(err, &ce) || ce.Code() != connect.CodeUnauthenticated ||
				ce.Message() != "a valid API key is required in the x-api-key header" {
				t.Fatalf("got %v, want unauthenticated with the service's own message", err)
			}
		})
	}
}
