package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	usersv1 "usersd/gen/users/v1"
	"usersd/gen/users/v1/usersv1connect"
	"usersd/handlers/apierror"
	"usersd/internal/apitest"
)

// TestEveryErrorCarriesItsReason: an error says why as a constant a client can branch on, and
// names what it is about, the same on every protocol. RPC clients find a google.rpc.ErrorInfo
// (reason, domain "usersd", metadata) in the error's details, and for a bad input a
// google.rpc.BadRequest naming the field; REST clients find the same facts in the error body.
func TestEveryErrorCarriesItsReason(t *testing.T) {
	s := startServer(t)
	existing := apitest.IDOf(t, s.CreateUser(t, "Ada", ""))
	for _, c := range []struct {
		name     string
		rpc      func(ctx context.Context, c usersv1connect.UsersClient) error
		keyless  bool    // the RPC is sent without a key
		rest     request // the same mistake over REST; no Method if REST cannot make it
		code     connect.Code
		status   int
		reason   string
		metadata map[string]string
	}{
		{
			name: "a user without a name",
			rpc: func(ctx context.Context, c usersv1connect.UsersClient) error {
				_, err := c.CreateUser(ctx, &usersv1.CreateUserRequest{User: &usersv1.User{Name: " "}})
				return err
			},
			rest: request{Method: "POST", Path: "/users", Header: apitest.JSONBody, Body: `{"name":" "}`, Key: true},
			code: connect.CodeInvalidArgument, status: http.StatusBadRequest, reason: "INVALID_FIELD", metadata: map[string]string{"field": "name"},
		},
		{
			name: "an update mask naming no field of User",
			rpc: func(ctx context.Context, c usersv1connect.UsersClient) error {
				_, err := c.UpdateUser(ctx, &usersv1.UpdateUserRequest{Id: int32(existing), User: &usersv1.User{}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"shoe_size"}}})
				return err
			},
			code: connect.CodeInvalidArgument, status: http.StatusBadRequest, reason: "INVALID_FIELD", metadata: map[string]string{"field": "update_mask"},
		},
		{
			name: "a limit that is not a number",
			rest: request{Method: "GET", Path: "/users?limit=many"},
			code: connect.CodeInvalidArgument, status: http.StatusBadRequest, reason: "INVALID_FIELD", metadata: map[string]string{"field": "limit"},
		},
		{
			name: "a user that does not exist",
			rpc: func(ctx context.Context, c usersv1connect.UsersClient) error {
				_, err := c.GetUser(ctx, &usersv1.GetUserRequest{Id: 424242})
				return err
			},
			rest: request{Method: "GET", Path: "/users/424242"},
			code: connect.CodeNotFound, status: http.StatusNotFound, reason: "USER_NOT_FOUND", metadata: map[string]string{"id": "424242"},
		},
		{
			name: "a write without a key",
			rpc: func(ctx context.Context, c usersv1connect.UsersClient) error {
				_, err := c.CreateUser(ctx, &usersv1.CreateUserRequest{User: &usersv1.User{Name: "Grace"}})
				return err
			},
			keyless: true,
			rest:    request{Method: "POST", Path: "/users", Header: apitest.JSONBody, Body: `{"name":"Grace"}`},
			code:    connect.CodeUnauthenticated, status: http.StatusUnauthorized, reason: "UNAUTHENTICATED",
		},
		{
			name: "a write whose etag is stale",
			rpc: func(ctx context.Context, c usersv1connect.UsersClient) error {
				_, err := c.UpdateUser(ctx, &usersv1.UpdateUserRequest{Id: int32(existing), User: &usersv1.User{Name: "Ada L"}, Etag: `"99"`, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"name"}}})
				return err
			},
			rest: request{Method: "PATCH", Path: fmt.Sprintf("/users/%d", existing), Header: map[string]string{"Content-Type": "application/merge-patch+json", "If-Match": `"99"`}, Body: `{"name":"Ada L"}`, Key: true},
			code: connect.CodeAborted, status: http.StatusPreconditionFailed, reason: "ETAG_MISMATCH",
		},
		{
			name: "a body of another media type",
			rest: request{Method: "POST", Path: "/users", Header: map[string]string{"Content-Type": "text/plain"}, Body: `{"name":"x"}`, Key: true},
			code: connect.CodeInvalidArgument, status: http.StatusUnsupportedMediaType, reason: "UNSUPPORTED_MEDIA_TYPE", metadata: map[string]string{"field": "Content-Type"},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.rpc != nil {
				for _, p := range apitest.RPCProtocols {
					key := apitest.Key
					if c.keyless {
						key = ""
					}
					err := c.rpc(context.Background(), s.RPCClient(p, key))
					var ce *connect.Error
					if !errors.As(err, &ce) || ce.Code() != c.code {
						t.Fatalf("%s: %v, want %v", p.Name, err, c.code)
					}
					wantDetails(t, p.Name, ce, c.reason, c.metadata)
				}
			}
			if c.rest.Method != "" {
				res := s.Do(t, apitest.HTTP1Client, c.rest)
				if res.Status != c.status {
					t.Fatalf("REST: %d %s, want %d", res.Status, res.Body, c.status)
				}
				_, reason, err := apitest.CheckErrorBody(res.Body)
				var body apitest.ErrorBody
				decodeErr := json.Unmarshal(res.Body, &body)
				if err != nil || decodeErr != nil || reason != c.reason || !maps.Equal(body.Metadata, c.metadata) {
					t.Fatalf("REST: %s (%v), want reason %s and metadata %v", res.Body, err, c.reason, c.metadata)
				}
			}
		})
	}
}

// wantDetails checks that ce carries the ErrorInfo of reason with metadata, and for an invalid
// argument the BadRequest of the same field with the message.
func wantDetails(t *testing.T, protocol string, ce *connect.Error, reason string, metadata map[string]string) {
	t.Helper()
	var info *errdetails.ErrorInfo
	var bad *errdetails.BadRequest
	for _, d := range ce.Details() {
		v, err := d.Value()
		if err != nil {
			t.Fatalf("%s: a detail of type %s does not decode: %v", protocol, d.Type(), err)
		}
		switch v := v.(type) {
		case *errdetails.ErrorInfo:
			info = v
		case *errdetails.BadRequest:
			bad = v
		}
	}
	if info == nil || info.GetReason() != reason || info.GetDomain() != apierror.Domain || !maps.Equal(info.GetMetadata(), metadata) {
		t.Fatalf("%s: ErrorInfo %v, want reason %s, domain %s, metadata %v", protocol, info, reason, apierror.Domain, metadata)
	}
	if ce.Code() != connect.CodeInvalidArgument {
		if bad != nil {
			t.Fatalf("%s: a BadRequest on a %v error", protocol, ce.Code())
		}
		return
	}
	if violations := bad.GetFieldViolations(); len(violations) != 1 || violations[0].GetField() != metadata["field"] || violations[0].GetDescription() != ce.Message() {
		t.Fatalf("%s: BadRequest %v, want one violation of %s saying %q", protocol, bad, metadata["field"], ce.Message())
	}
}
