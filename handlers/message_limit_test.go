package handlers

import (
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"usersd/internal/apitest"
	conformancev1 "usersd/internal/conformancetest/gen/connectrpc/conformance/v1"
)

// The body limit is a limit on each message, on every protocol: a message of exactly the limit
// passes whatever envelope carries it (gRPC's and Connect streaming's 5 bytes are not counted), a
// stream may carry many such messages, and a message over the limit is resource_exhausted whether
// it was sent compressed or not.
func TestRPCMessageLimitIsPerMessage(t *testing.T) {
	const limit = 1000
	s := startServerWith(t, withEchoService(Config{MaxBodyBytes: limit}))
	sized := func(t *testing.T, size int) []byte {
		data := make([]byte, size-3) // a tag and a two-byte length before the data
		if got := proto.Size(&conformancev1.UnaryRequest{RequestData: data}); got != size {
			t.Fatalf("the message is %d bytes, want %d", got, size)
		}
		return data
	}
	for _, p := range apitest.RPCProtocols {
		if p.Name == "Connect JSON" {
			continue // the sizes here are of binary messages; a JSON message's is its base64 text's
		}
		t.Run(p.Name, func(t *testing.T) {
			c := echoClient(s, p)
			if _, err := c.Unary(t.Context(), connect.NewRequest(&conformancev1.UnaryRequest{RequestData: sized(t, limit)})); err != nil {
				t.Errorf("a message of exactly the limit: %v, want it answered", err)
			}
			stream := c.ClientStream(t.Context())
			for range 3 {
				if err := stream.Send(&conformancev1.ClientStreamRequest{RequestData: sized(t, limit)}); err != nil {
					t.Fatalf("sending a message of the limit on a stream: %v", err)
				}
			}
			if res, err := stream.CloseAndReceive(); err != nil || len(res.Msg.GetPayload().GetData()) != 3 {
				t.Errorf("three messages of the limit on one stream: %v, want all three received", err)
			}
			for _, compressed := range []bool{false, true} {
				var options []connect.ClientOption
				if compressed {
					options = append(options, connect.WithSendGzip())
				}
				_, err := echoClient(s, p, options...).Unary(t.Context(), connect.NewRequest(&conformancev1.UnaryRequest{RequestData: sized(t, limit+1)}))
				if connect.CodeOf(err) != connect.CodeResourceExhausted {
					t.Errorf("a message one byte over the limit (gzip %v): %v, want resource_exhausted", compressed, err)
				}
			}
		})
	}
}
