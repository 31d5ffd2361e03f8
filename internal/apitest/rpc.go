// The RPC side of the tests: the four protocols the generated client speaks to the one port, and
// helpers that hold every RPC answer to the rules all of them share (codes, no leaked detail).
package apitest

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protowire"

	usersv1 "usersd/gen/users/v1"
	"usersd/gen/users/v1/usersv1connect"
)

// RPCProtocol is one of the four RPC protocols that the generated client speaks to the port.
type RPCProtocol struct {
	Name string
	Opts []connect.ClientOption
}

// RPCProtocols are the protocols that every RPC case runs over, all on h2c.
var RPCProtocols = []RPCProtocol{
	{"Connect binary", nil},
	{"Connect JSON", []connect.ClientOption{connect.WithProtoJSON()}},
	{"gRPC", []connect.ClientOption{connect.WithGRPC()}},
	{"gRPC-Web", []connect.ClientOption{connect.WithGRPCWeb()}},
}

// RPCProtocolNamed returns the protocol of rpcProtocols called name.
func RPCProtocolNamed(t *testing.T, name string) RPCProtocol {
	t.Helper()
	i := slices.IndexFunc(RPCProtocols, func(p RPCProtocol) bool { return p.Name == name })
	if i < 0 {
		t.Fatalf("no protocol %q", name)
	}
	return RPCProtocols[i]
}

// rpcWithKey is a client option that sends key in the x-api-key header of every request, unary
// and streaming.
func rpcWithKey(key string) connect.ClientOption {
	return connect.WithInterceptors(keyInterceptor(key))
}

// keyInterceptor sets x-api-key on every call of a client.
type keyInterceptor string

func (k keyInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		req.Header().Set("x-api-key", string(k))
		return next(ctx, req)
	}
}

func (k keyInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		conn.RequestHeader().Set("x-api-key", string(k))
		return conn
	}
}

func (k keyInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next // a client's interceptor: handlers are not its business
}

// RPCClient returns a generated Users client of the server at baseURL that speaks p over h2c; key
// "" sends no key at all.
func RPCClient(baseURL string, p RPCProtocol, key string, extra ...connect.ClientOption) usersv1connect.UsersClient {
	opts := slices.Clone(p.Opts)
	if key != "" {
		opts = append(opts, rpcWithKey(key))
	}
	opts = append(opts, extra...)
	return usersv1connect.NewUsersClient(H2CClient, baseURL, opts...)
}

// WebhooksClient is RPCClient for the Webhooks service.
func WebhooksClient(baseURL string, p RPCProtocol, key string) usersv1connect.WebhooksClient {
	opts := slices.Clone(p.Opts)
	if key != "" {
		opts = append(opts, rpcWithKey(key))
	}
	return usersv1connect.NewWebhooksClient(H2CClient, baseURL, opts...)
}

// RPCLeakWords are fragments of store, driver or Go detail that no error message may contain: the
// last three are how Go type names of generated messages read (*usersv1.GetUserRequest).
var RPCLeakWords = []string{"sql", "database", "driver", "constraint", "no rows", "syntax error", "goroutine", "panic",
	"usersv1", "grpc_health_v1", "unmarshal into"}

// RPCWantCode fails the test unless err carries code, and checks that its message leaks nothing.
func RPCWantCode(t *testing.T, err error, code connect.Code) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %s", code)
	}
	if got := connect.CodeOf(err); got != code {
		t.Fatalf("got code %s (%v), want %s", got, err, code)
	}
	RPCCheckMessage(t, err)
}

// RPCCheckMessage fails the test if the message of err holds store or driver detail.
func RPCCheckMessage(t *testing.T, err error) {
	t.Helper()
	msg := err.Error()
	var ce *connect.Error
	if errors.As(err, &ce) {
		msg = ce.Message()
	}
	for _, w := range RPCLeakWords {
		if strings.Contains(strings.ToLower(msg), w) {
			t.Errorf("error message %q contains %q", msg, w)
		}
	}
}

// RPCMust fails the test if err is not nil.
func RPCMust(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v (code %s)", what, err, connect.CodeOf(err))
	}
}

// RPCCreate creates a user over RPC and returns it as stored.
func RPCCreate(t *testing.T, c usersv1connect.UsersClient, name, role string) *usersv1.User {
	t.Helper()
	res, err := c.CreateUser(t.Context(), &usersv1.CreateUserRequest{User: &usersv1.User{Name: name, Role: role}})
	RPCMust(t, "CreateUser "+name, err)
	return res.GetUser()
}

// RPCGet reads a user over RPC.
func RPCGet(t *testing.T, c usersv1connect.UsersClient, id int32) *usersv1.User {
	t.Helper()
	u, err := c.GetUser(t.Context(), &usersv1.GetUserRequest{Id: id})
	RPCMust(t, fmt.Sprintf("GetUser %d", id), err)
	return u
}

// RPCWantEtag fails the test unless u's etag is the quoted version n.
func RPCWantEtag(t *testing.T, u *usersv1.User, n int) {
	t.Helper()
	if want := strconv.Quote(strconv.Itoa(n)); u.GetEtag() != want {
		t.Fatalf("etag of %v is %s, want %s", u, u.GetEtag(), want)
	}
}

// RPCNames returns the names of users, in order.
func RPCNames(users []*usersv1.User) []string {
	names := make([]string, len(users))
	for i, u := range users {
		names[i] = u.GetName()
	}
	return names
}

// ConnectErrorBody reads a Connect error body {"code": ..., "message": ...}.
func ConnectErrorBody(t *testing.T, body []byte) (code, message string) {
	t.Helper()
	var e struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Code == "" {
		t.Fatalf("body %q is not a Connect error: %v", body, err)
	}
	return e.Code, e.Message
}

// RawGRPC sends msg as the one gRPC-framed request message of a call to path on the server at
// baseURL over h2c, requires HTTP/2 200 and grpc-status 0 in the trailers, and returns the response
// messages.
func RawGRPC(t *testing.T, baseURL, path string, msg []byte) [][]byte {
	t.Helper()
	frame := make([]byte, 5, 5+len(msg))
	binary.BigEndian.PutUint32(frame[1:], uint32(len(msg)))
	frame = append(frame, msg...)
	req, err := http.NewRequestWithContext(t.Context(), "POST", baseURL+path, bytes.NewReader(frame))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("TE", "trailers")
	res, err := H2CClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK || res.ProtoMajor != 2 {
		t.Fatalf("%s: %s %d, want HTTP/2 200", path, res.Proto, res.StatusCode)
	}
	if got := res.Trailer.Get("Grpc-Status"); got != "0" {
		t.Fatalf("%s: grpc-status trailer %q (message %q, header status %q), want 0",
			path, got, res.Trailer.Get("Grpc-Message"), res.Header.Get("Grpc-Status"))
	}
	var messages [][]byte
	for len(body) > 0 {
		if len(body) < 5 || body[0] != 0 {
			t.Fatalf("%s: bad gRPC frame header in % x", path, body)
		}
		n := int(binary.BigEndian.Uint32(body[1:5]))
		if len(body) < 5+n {
			t.Fatalf("%s: frame of %d bytes, only %d left", path, n, len(body)-5)
		}
		messages = append(messages, body[5:5+n])
		body = body[5+n:]
	}
	return messages
}

// GRPCHealthStatus sends a raw gRPC Check for service ("" for the whole server) to the server at
// baseURL and returns the status number, failing the test unless the answer is one message holding
// only that field.
func GRPCHealthStatus(t *testing.T, baseURL, service string) uint64 {
	t.Helper()
	var msg []byte
	if service != "" {
		msg = protowire.AppendTag(msg, 1, protowire.BytesType) // service
		msg = protowire.AppendString(msg, service)
	}
	answers := RawGRPC(t, baseURL, "/grpc.health.v1.Health/Check", msg)
	if len(answers) != 1 {
		t.Fatalf("health: %d answers, want 1", len(answers))
	}
	num, typ, n := protowire.ConsumeTag(answers[0])
	if n < 0 || num != 1 || typ != protowire.VarintType {
		t.Fatalf("health answer % x does not start with the varint field status", answers[0])
	}
	status, m := protowire.ConsumeVarint(answers[0][n:])
	if m < 0 || n+m != len(answers[0]) {
		t.Fatalf("health answer % x holds more than its status", answers[0])
	}
	return status
}

// Snapshot reads everything a client can see of the users, and of one user's posts, on the server
// at baseURL: what a refused write must leave as it was.
func Snapshot(t *testing.T, baseURL string, userID int) string {
	t.Helper()
	users := Do(t, HTTP1Client, baseURL, Request{Method: "GET", Path: "/users?limit=100"})
	posts := Do(t, HTTP1Client, baseURL, Request{Method: "GET", Path: fmt.Sprintf("/users/%d/posts?limit=100", userID)})
	if users.Status != http.StatusOK || posts.Status != http.StatusOK {
		t.Fatalf("snapshot: users %d, posts %d", users.Status, posts.Status)
	}
	return string(users.Body) + " " + users.Header.Get("X-Total-Count") + " | " + string(posts.Body)
}

// IDOf reads the id of a decoded user or post.
func IDOf(t *testing.T, o map[string]any) int {
	t.Helper()
	id, ok := o["id"].(float64)
	if !ok {
		t.Fatalf("%v has no numeric id", o)
	}
	return int(id)
}
