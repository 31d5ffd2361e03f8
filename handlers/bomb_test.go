package handlers

import (
	"context"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protowire"

	usersv1 "usersd/gen/users/v1"
	"usersd/internal/apitest"
)

// bombBytes is how far each bomb inflates: 16 times the 1 MiB body limit, from about 16 KB of gzip.
// A Connect GET carries its bomb in the URL, which must fit the header limit: 4 MiB, from about 4 KB.
const bombBytes, getBombBytes = 16 << 20, 4 << 20

// TestDecompressionBombsAreRefusedAtTheLimit sends messages that are small compressed and inflate far
// past the body limit, on every RPC protocol and on Connect's GET, and expects each refused with
// resource_exhausted (as a message over the limit sent uncompressed is) by the bounded decompressor,
// which stops at the limit. connect-go's own gzip
// refused them too, but only after inflating the whole message to report its size (resource_exhausted,
// "message size ... is larger than configured max"), which a bomb turns into seconds of CPU.
func TestDecompressionBombsAreRefusedAtTheLimit(t *testing.T) {
	s := startServer(t)
	ctx := context.Background()
	check := func(t *testing.T, err error) {
		t.Helper()
		if connect.CodeOf(err) != connect.CodeResourceExhausted || !strings.Contains(err.Error(), "inflates past the limit of 1048576 bytes") {
			t.Fatalf("a message that inflates past the limit: %v; want resource_exhausted from the bounded decompressor", err)
		}
	}
	for _, p := range apitest.RPCProtocols {
		t.Run(p.Name, func(t *testing.T) {
			c := s.RPCClient(p, apitest.Key, connect.WithSendGzip())
			req := &usersv1.CreateUserRequest{User: &usersv1.User{Name: strings.Repeat("a", bombBytes)}}
			_, err := c.CreateUser(ctx, req)
			check(t, err)
		})
	}
	t.Run("Connect GET", func(t *testing.T) {
		c := s.RPCClient(apitest.RPCProtocolNamed(t, "Connect binary"), "", connect.WithHTTPGet(), connect.WithSendGzip(), connect.WithHTTPGetMaxURLSize(32<<10, false)) // compressed only to fit the URL
		// The request's one field is tiny; an extra field, unknown to the server, is all zeros.
		req := &usersv1.GetUserRequest{Id: 1}
		req.ProtoReflect().SetUnknown(protowire.AppendBytes(protowire.AppendTag(nil, 1000, protowire.BytesType), make([]byte, getBombBytes)))
		_, err := c.GetUser(ctx, req)
		check(t, err)
	})
	// The refusals left nothing behind.
	if _, err := s.RPCClient(apitest.RPCProtocols[0], "").GetUser(ctx, &usersv1.GetUserRequest{Id: 1}); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("after the bombs, user 1: %v; want not_found", err)
	}
}
