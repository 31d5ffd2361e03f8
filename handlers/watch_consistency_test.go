package handlers

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"

	usersv1 "usersd/gen/users/v1"
	"usersd/internal/apitest"
	"usersd/users"
)

// TestAWatchRefusesAMalformedConsistencyTokenAsAReadDoes: a watch that sends a token this service
// never issued is refused before it starts, 400 naming the header on SSE and invalid_argument on
// every RPC protocol, as a read is; a token that a write answered opens the watch.
func TestAWatchRefusesAMalformedConsistencyTokenAsAReadDoes(t *testing.T) {
	s := startServer(t)
	written := s.Do(t, apitest.Transports[0].Client, request{Method: "POST", Path: "/users", Body: `{"name":"ada"}`, Key: true, Header: jsonBody})
	issued := written.Header.Get(users.ConsistencyTokenHeader)
	if !tokenForm.MatchString(issued) {
		t.Fatalf("a create answered Consistency-Token %q", issued)
	}
	watchWithToken := func(p apitest.WatchProtocol, token string) error {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		if p.RPC == nil {
			res, err := apitest.OpenEventStream(ctx, s.Server, p.SSE, -1, "", http.Header{users.ConsistencyTokenHeader: {token}})
			if err == nil {
				res.Body.Close()
			}
			return err
		}
		ctx, info := connect.NewClientContext(ctx)
		info.RequestHeader().Set(users.ConsistencyTokenHeader, token)
		stream, err := s.RPCClient(*p.RPC, "").WatchUsers(ctx, &usersv1.WatchUsersRequest{})
		if err != nil {
			return err
		}
		defer stream.Close()
		if !stream.Receive() { // the first message is the heartbeat that says where the watch starts
			return stream.Err()
		}
		return nil
	}
	for _, p := range apitest.WatchProtocols() {
		t.Run(p.Name, func(t *testing.T) {
			for _, token := range malformedTokens {
				err := watchWithToken(p, token)
				apitest.WantWatchCode(t, p, err, connect.CodeInvalidArgument, http.StatusBadRequest)
				var refusal apitest.SSERefusal
				if errors.As(err, &refusal) && !strings.Contains(refusal.Body, users.ConsistencyTokenHeader) {
					t.Errorf("Consistency-Token %q refused with %s, which does not name the header", token, refusal.Body)
				}
				if p.RPC != nil {
					apitest.RPCCheckMessage(t, err)
					if !strings.Contains(err.Error(), users.ConsistencyTokenHeader) {
						t.Errorf("Consistency-Token %q refused with %v, which does not name the header", token, err)
					}
				}
			}
			if err := watchWithToken(p, issued); err != nil {
				t.Errorf("a watch with the token a write answered: %v", err)
			}
		})
	}
}
