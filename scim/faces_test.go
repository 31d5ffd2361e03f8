package scim_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	usersv1 "usersd/gen/users/v1"
	"usersd/internal/apitest"
)

// TestASCIMWriteShowsOnEveryProtocolAndInTheFeed: a user an identity provider creates and disables
// over SCIM is the same user on every RPC protocol, and the feed names the identity provider's key
// as the actor of each change.
func TestASCIMWriteShowsOnEveryProtocolAndInTheFeed(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *server) {
		created := s.do("POST", "/scim/v2/Users", `{`+userSchema+`,"userName":"barbara@example.com","externalId":"b-1"}`).want(t, http.StatusCreated)
		id64, err := strconv.ParseInt(str(created.body, "id"), 10, 32)
		if err != nil {
			t.Fatal(err)
		}
		id := int32(id64)
		s.do("PATCH", "/scim/v2/Users/"+str(created.body, "id"), `{`+patchSchema+`,"Operations":[{"op":"replace","path":"active","value":false}]}`).
			want(t, http.StatusOK)

		for _, p := range apitest.RPCProtocols {
			client := apitest.Server{BaseURL: s.base}.RPCClient(p, writeKey)
			u, err := client.GetUser(context.Background(), &usersv1.GetUserRequest{Id: id})
			if err != nil {
				t.Fatalf("%s: %v", p.Name, err)
			}
			if u.GetUserName() != "barbara@example.com" || u.GetExternalId() != "b-1" || u.GetActive() {
				t.Errorf("%s: %v", p.Name, u)
			}
		}

		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		client := apitest.Server{BaseURL: s.base}.RPCClient(apitest.RPCProtocolNamed(t, "gRPC"), writeKey)
		stream, err := client.WatchUsers(ctx, &usersv1.WatchUsersRequest{AfterSequence: new(int64)})
		if err != nil {
			t.Fatal(err)
		}
		defer stream.Close()
		var kinds []usersv1.UserEvent_Kind
		for len(kinds) < 2 && stream.Receive() {
			e := stream.Msg()
			if e.GetKind() == usersv1.UserEvent_KIND_HEARTBEAT || e.GetUser().GetId() != id {
				continue
			}
			kinds = append(kinds, e.GetKind())
			if e.GetActor() != "entra-id" || e.GetActorType() != usersv1.UserEvent_ACTOR_TYPE_API_KEY {
				t.Errorf("event %v: actor %q (%v), want the key entra-id", e.GetKind(), e.GetActor(), e.GetActorType())
			}
		}
		if len(kinds) != 2 || kinds[0] != usersv1.UserEvent_KIND_CREATED || kinds[1] != usersv1.UserEvent_KIND_UPDATED {
			t.Errorf("the feed's events of the user: %v (%v), want a create and an update", kinds, stream.Err())
		}
	})
}
