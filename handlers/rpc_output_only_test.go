package handlers

import (
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	usersv1 "usersd/gen/users/v1"
	"usersd/internal/apitest"
)

// TestRPCWritesIgnoreOutputOnlyFields sends every write RPC, over every protocol, with its
// resource's output-only fields set to what the server would never answer, even a timestamp out of
// range: each is ignored (AIP-203), as it is over REST. Only the ids that a request compares with
// the resource it names must agree (a replaced user's id, a new post's user_id).
func TestRPCWritesIgnoreOutputOnlyFields(t *testing.T) {
	past := timestamppb.New(timestamppb.Now().AsTime().AddDate(-30, 0, 0))
	for _, p := range apitest.RPCProtocols {
		t.Run(p.Name, func(t *testing.T) {
			// A timestamp that is no instant at all (nanos past a second), where the protocol can
			// carry one: protojson cannot write it, so Connect JSON sends the first instant it can.
			invalid := &timestamppb.Timestamp{Seconds: 1, Nanos: 2_000_000_000}
			if p.Name == "Connect JSON" {
				invalid = &timestamppb.Timestamp{Seconds: -62135596800}
			}
			s := startServer(t)
			c := s.RPCClient(p, apitest.Key)

			created, err := c.CreateUser(t.Context(), &usersv1.CreateUserRequest{User: &usersv1.User{
				Id: 4242, Name: "Ada", CreatedAt: past, UpdatedAt: invalid, Etag: `"77"`,
			}})
			apitest.RPCMust(t, "CreateUser", err)
			user := created.GetUser()
			if user.GetId() == 4242 || user.GetCreatedAt().AsTime().Equal(past.AsTime()) || !proto.Equal(user.GetCreatedAt(), user.GetUpdatedAt()) {
				t.Fatalf("created %v: the id and times must be the server's", user)
			}
			apitest.RPCWantEtag(t, user, 1)

			// An etag in the body is not a precondition: only the request's etag is.
			replaced, err := c.ReplaceUser(t.Context(), &usersv1.ReplaceUserRequest{Id: user.GetId(), User: &usersv1.User{
				Id: user.GetId(), Name: "Ada King", CreatedAt: invalid, UpdatedAt: past, Etag: `"77"`,
			}})
			apitest.RPCMust(t, "ReplaceUser", err)
			if r := replaced.GetUser(); r.GetName() != "Ada King" || !proto.Equal(r.GetCreatedAt(), user.GetCreatedAt()) || r.GetUpdatedAt().AsTime().Before(user.GetUpdatedAt().AsTime()) {
				t.Fatalf("replaced %v: want the new name, the first createdAt and a later updatedAt", r)
			}
			apitest.RPCWantEtag(t, replaced.GetUser(), 2)

			// Without a mask, UpdateUser sets the fields the user populates: the output-only ones
			// are populated here and still ignored.
			updated, err := c.UpdateUser(t.Context(), &usersv1.UpdateUserRequest{Id: user.GetId(), User: &usersv1.User{
				Role: "countess", CreatedAt: past, UpdatedAt: invalid, Etag: `"1"`,
			}})
			apitest.RPCMust(t, "UpdateUser", err)
			if u := updated.GetUser(); u.GetName() != "Ada King" || u.GetRole() != "countess" || !proto.Equal(u.GetCreatedAt(), user.GetCreatedAt()) {
				t.Fatalf("updated %v: want the role set, the rest kept", u)
			}
			apitest.RPCWantEtag(t, updated.GetUser(), 3)

			post, err := c.CreateUserPost(t.Context(), &usersv1.CreateUserPostRequest{UserId: user.GetId(), Post: &usersv1.Post{
				Id: 4242, UserId: user.GetId(), Title: "Notes", CreatedAt: invalid,
			}})
			apitest.RPCMust(t, "CreateUserPost", err)
			if got := post.GetPost(); got.GetId() == 4242 || got.GetUserId() != user.GetId() || got.GetCreatedAt().CheckValid() != nil {
				t.Fatalf("created post %v: the id and time must be the server's", got)
			}
			if got := apitest.RPCGet(t, c, user.GetId()); !proto.Equal(got, updated.GetUser()) {
				t.Fatalf("GetUser returned %v, want the updated %v", got, updated.GetUser())
			}
		})
	}
}
