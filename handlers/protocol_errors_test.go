package handlers

import (
	"context"
	"errors"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	usersv1 "usersd/gen/users/v1"
	"usersd/handlers/apierror"
	"usersd/internal/apitest"
)

// TestConnectsOwnErrorsCarryTheirReason: the errors that connect-go answers by itself, for a
// request it cannot take before the service sees it (a message over the size limit, one that does
// not decode), carry the ErrorInfo of every other error, on every protocol, unary or streaming.
func TestConnectsOwnErrorsCarryTheirReason(t *testing.T) {
	const limit = 1 << 10
	s := startServerWith(t, Config{MaxBodyBytes: limit})
	tooLong := strings.Repeat("n", 4*limit)
	for _, p := range apitest.RPCProtocols {
		client := s.RPCClient(p, apitest.Key)
		t.Run(p.Name+"/a unary message over the limit", func(t *testing.T) {
			_, err := client.CreateUser(context.Background(), &usersv1.CreateUserRequest{User: &usersv1.User{Name: tooLong}})
			var ce *connect.Error
			if !errors.As(err, &ce) || ce.Code() != connect.CodeResourceExhausted {
				t.Fatalf("%v, want resource_exhausted", err)
			}
			wantDetails(t, p.Name, ce, "RESOURCE_EXHAUSTED", nil)
		})
		t.Run(p.Name+"/a stream's request over the limit", func(t *testing.T) {
			stream, err := client.WatchUsers(context.Background(), &usersv1.WatchUsersRequest{Role: tooLong})
			if err == nil {
				for stream.Receive() {
				}
				err = stream.Err()
				stream.Close()
			}
			var ce *connect.Error
			if !errors.As(err, &ce) || ce.Code() != connect.CodeResourceExhausted {
				t.Fatalf("%v, want resource_exhausted", err)
			}
			wantDetails(t, p.Name, ce, "RESOURCE_EXHAUSTED", nil)
		})
	}
	for _, p := range apitest.RPCProtocols {
		t.Run(p.Name+"/a message that does not decode", func(t *testing.T) {
			client := s.RPCClient(p, apitest.Key, connect.WithCodec(undecodable{}), connect.WithCodec(undecodable{json: true}))
			_, err := client.CreateUser(context.Background(), &usersv1.CreateUserRequest{User: &usersv1.User{Name: "Ada"}})
			var ce *connect.Error
			if !errors.As(err, &ce) || ce.Code() != connect.CodeInvalidArgument {
				t.Fatalf("%v, want invalid_argument", err)
			}
			wantDetails(t, p.Name, ce, "INVALID_FIELD", map[string]string{"field": apierror.ProtocolField})
		})
	}
}

// undecodable is a client codec that sends what no server can decode as the request, under the
// name of the proto or the JSON codec, and reads answers as they are.
type undecodable struct{ json bool }

func (c undecodable) Name() string {
	if c.json {
		return "json"
	}
	return "proto"
}

func (c undecodable) Marshal(any) ([]byte, error) {
	if c.json {
		return []byte(`{"user":`), nil
	}
	return []byte{0xff, 0xff, 0xff}, nil // a field number's varint that never ends
}

func (c undecodable) Unmarshal(data []byte, m any) error {
	if c.json {
		return protojson.Unmarshal(data, m.(proto.Message))
	}
	return proto.Unmarshal(data, m.(proto.Message))
}
