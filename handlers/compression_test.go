package handlers

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"testing"

	"google.golang.org/protobuf/proto"

	usersv1 "usersd/gen/users/v1"
	"usersd/internal/apitest"
)

// TestSmallRPCAnswersAreNotCompressed: a gRPC client that accepts gzip (they all do) gets a small
// answer uncompressed, since compressing a few hundred bytes costs more than it saves, and a large
// one compressed.
func TestSmallRPCAnswersAreNotCompressed(t *testing.T) {
	s := startServer(t)
	for i := range 100 {
		s.CreateUser(t, fmt.Sprintf("user number %03d with a longish name", i), "a role that takes some room")
	}
	call := func(procedure string, msg proto.Message) (encoding string, compressedFlag byte) {
		body, _ := proto.Marshal(msg)
		frame := binary.BigEndian.AppendUint32([]byte{0}, uint32(len(body)))
		req, _ := http.NewRequest("POST", s.BaseURL+"/users.v1.Users/"+procedure, bytes.NewReader(append(frame, body...)))
		req.Header.Set("Content-Type", "application/grpc")
		req.Header.Set("TE", "trailers")
		req.Header.Set("Grpc-Accept-Encoding", "gzip")
		res, err := apitest.H2CClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		answer, err := io.ReadAll(res.Body)
		if err != nil || len(answer) < 5 || res.Trailer.Get("Grpc-Status") != "0" {
			t.Fatalf("%s: %d bytes, %v, grpc-status %q", procedure, len(answer), err, res.Trailer.Get("Grpc-Status"))
		}
		return res.Header.Get("Grpc-Encoding"), answer[0]
	}
	if encoding, flag := call("GetUser", &usersv1.GetUserRequest{Id: 1}); flag != 0 {
		t.Errorf("a single user came compressed (grpc-encoding %q)", encoding)
	}
	if encoding, flag := call("ListUsers", &usersv1.ListUsersRequest{Limit: 100}); flag != 1 || encoding != "gzip" {
		t.Errorf("a page of 100 users came uncompressed (grpc-encoding %q, flag %d)", encoding, flag)
	}
}
