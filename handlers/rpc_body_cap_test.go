package handlers

import (
	"encoding/binary"
	"io"
	"net/http"
	"sync/atomic"
	"testing"

	"usersd/internal/apitest"
)

// TestAnRPCBodyIsReadNoFurtherThanItsLimit: connect reads to its end, and throws away, a body whose
// message is over the limit (on an enveloped message, up to the length its envelope claims). The
// cap on the body as a whole stops that: the server answers and stops reading soon after the
// limit, instead of taking in all that the client sends.
func TestAnRPCBodyIsReadNoFurtherThanItsLimit(t *testing.T) {
	const limit, sent = 1 << 10, 64 << 20
	s := startServerWith(t, Config{MaxBodyBytes: limit})
	claimed := make([]byte, envelopeSize) // an uncompressed message that says it is 1 GiB
	binary.BigEndian.PutUint32(claimed[1:], 1<<30)
	for _, c := range []struct {
		name, path, contentType string
		prefix                  []byte
		client                  *http.Client
	}{
		{"Connect unary", "/users.v1.Users/GetUser", "application/proto", nil, &http.Client{Transport: &http.Transport{}}},
		{"gRPC-Web", "/users.v1.Users/GetUser", "application/grpc-web+proto", claimed, &http.Client{Transport: &http.Transport{}}},
		// A client stream is refused over HTTP/1.1 before its body is read: over h2c it is read.
		{"reflection's client stream over gRPC", "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", "application/grpc", claimed, apitest.NewH2CClient()},
	} {
		t.Run(c.name, func(t *testing.T) {
			body, feed := io.Pipe()
			var written atomic.Int64
			go func() {
				feed.Write(c.prefix)
				chunk := make([]byte, 64<<10)
				for written.Load() < sent {
					n, err := feed.Write(chunk)
					written.Add(int64(n))
					if err != nil {
						return
					}
				}
				feed.Close()
			}()
			req, err := http.NewRequest("POST", s.BaseURL+c.path, body)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", c.contentType)
			req.Header.Set("X-Api-Key", apitest.Key)
			res, err := c.client.Do(req)
			if err == nil {
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
			}
			body.CloseWithError(io.ErrClosedPipe) // the client stops sending, answered or not
			if n := written.Load(); n >= sent/2 {
				t.Fatalf("the server took in %d bytes of a body whose limit is %d", n, limit)
			}
		})
	}
}
