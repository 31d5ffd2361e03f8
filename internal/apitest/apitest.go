// Package apitest is what the tests of usersd's HTTP face share, in cmd/usersd (the real program)
// and in handlers (the handler in the test's own process): the two clients that reach the one
// port (HTTP/1.1, and h2c), the requests and answers the tests send and read, and the check of
// every REST answer against the OpenAPI document (contract.go). Only tests import it.
package apitest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"usersd/gen/users/v1/usersv1connect"
)

// Key is the API key every test server accepts.
const Key = "test-key-0123456789"

// The two ways a client reaches the port: HTTP/1.1, and HTTP/2 without TLS (h2c, prior knowledge).
// Both check every answer against the REST contract (contract.go).
var (
	HTTP1Client = &http.Client{Transport: checkedTransport{&http.Transport{}}, Timeout: 30 * time.Second}
	H2CClient   = NewH2CClient()
)

// NewH2CClient returns an h2c client of its own (its own connections), whose answers are checked
// like those of the shared ones.
func NewH2CClient() *http.Client {
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: checkedTransport{&http.Transport{Protocols: &protocols}}, Timeout: 30 * time.Second}
}

// CloseIdleConnections closes the shared clients' idle connections: a test server's stop does it
// first, or net/http's Shutdown waits for a connection that was dialed but never used.
func CloseIdleConnections() {
	HTTP1Client.CloseIdleConnections()
	H2CClient.CloseIdleConnections()
}

// Transports names the clients that every REST case runs over.
var Transports = []struct {
	Name   string
	Client *http.Client
}{{"HTTP/1.1", HTTP1Client}, {"h2c", H2CClient}}

// Response is what a test needs of an HTTP answer.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
	Proto  string
}

// ErrorMessage returns the "error" member of a REST error body, failing the test for a body that
// is not one (see CheckErrorBody).
func (r Response) ErrorMessage(t *testing.T) string {
	t.Helper()
	msg, _, err := CheckErrorBody(r.Body)
	if err != nil {
		t.Fatalf("error body %s: %v", r.Body, err)
	}
	return msg
}

// ErrorReason returns the "reason" member of a REST error body, failing the test for a body that
// is not one (see CheckErrorBody).
func (r Response) ErrorReason(t *testing.T) string {
	t.Helper()
	_, reason, err := CheckErrorBody(r.Body)
	if err != nil {
		t.Fatalf("error body %s: %v", r.Body, err)
	}
	return reason
}

// ErrorBody is the REST error body, as openapi.json's Error schema describes it.
type ErrorBody struct {
	Error           string            `json:"error"`
	Reason          string            `json:"reason"`
	Metadata        map[string]string `json:"metadata"`
	FieldViolations []struct {
		Field       string `json:"field"`
		Description string `json:"description"`
	} `json:"fieldViolations"`
}

// reasonPattern is the form of every reason: upper snake case.
var reasonPattern = regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)

// CheckErrorBody reads a REST error body and returns its message and reason, or what is wrong with
// it: it must be JSON with nothing but the Error schema's members, a message, a reason in upper
// snake case, and for a bad input (INVALID_FIELD) the field in its metadata and one field violation
// naming the same field with the message.
func CheckErrorBody(body []byte) (message, reason string, err error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var b ErrorBody
	if err := dec.Decode(&b); err != nil {
		return "", "", fmt.Errorf(`not {"error": "...", "reason": "..."}: %v`, err)
	}
	if dec.More() {
		return "", "", errors.New("more than one JSON value")
	}
	switch {
	case b.Error == "":
		return "", "", errors.New(`no "error" message`)
	case !reasonPattern.MatchString(b.Reason):
		return "", "", fmt.Errorf(`"reason" %q is not an upper snake case constant`, b.Reason)
	case b.Reason == "INVALID_FIELD" && (b.Metadata["field"] == "" || len(b.FieldViolations) != 1 ||
		b.FieldViolations[0].Field != b.Metadata["field"] || b.FieldViolations[0].Description != b.Error):
		return "", "", errors.New(`a bad input's body must name its field in "metadata" and in one of "fieldViolations", with the message`)
	}
	return b.Error, b.Reason, nil
}

// Request describes one HTTP request of a test.
type Request struct {
	Method, Path string
	Header       map[string]string
	Body         string
	Key          bool // send the valid API key
}

// JSONBody is the JSON content type header of a write.
var JSONBody = map[string]string{"Content-Type": "application/json"}

// Server is a test server as its tests talk to it: where it listens.
type Server struct {
	BaseURL string // http://host:port
}

// Do sends req to the server with client and reads the whole answer.
func (s Server) Do(t *testing.T, client *http.Client, req Request) Response {
	t.Helper()
	return Do(t, client, s.BaseURL, req)
}

// RPCClient returns a generated Users client of the server that speaks p; key "" sends no key.
func (s Server) RPCClient(p RPCProtocol, key string, extra ...connect.ClientOption) usersv1connect.UsersClient {
	return RPCClient(s.BaseURL, p, key, extra...)
}

// CreateUser creates a user over REST and returns its JSON body decoded.
func (s Server) CreateUser(t *testing.T, name, role string) map[string]any {
	t.Helper()
	return CreateUser(t, s.BaseURL, name, role)
}

// Do sends req to the server at baseURL with client, and reads the whole answer.
func Do(t *testing.T, client *http.Client, baseURL string, req Request) Response {
	t.Helper()
	var body io.Reader
	if req.Body != "" {
		body = strings.NewReader(req.Body)
	}
	r, err := http.NewRequest(req.Method, baseURL+req.Path, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range req.Header {
		r.Header.Set(k, v)
	}
	if req.Key {
		r.Header.Set("x-api-key", Key)
	}
	res, err := client.Do(r)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.Path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", req.Method, req.Path, err)
	}
	return Response{Status: res.StatusCode, Header: res.Header, Body: b, Proto: res.Proto}
}

// CreateUser creates a user over REST on the server at baseURL and returns its JSON body decoded.
func CreateUser(t *testing.T, baseURL, name, role string) map[string]any {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"name": name, "role": role})
	res := Do(t, HTTP1Client, baseURL, Request{Method: "POST", Path: "/users", Header: JSONBody, Body: string(body), Key: true})
	if res.Status != http.StatusCreated {
		t.Fatalf("create %q: %d %s", name, res.Status, res.Body)
	}
	return DecodeObject(t, res.Body)
}

// DecodeObject decodes a JSON object, failing the test for anything else.
func DecodeObject(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("body %q is not a JSON object: %v", b, err)
	}
	return v
}

// DecodeArray decodes a JSON array of objects, failing the test for anything else.
func DecodeArray(t *testing.T, b []byte) []map[string]any {
	t.Helper()
	var v []map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("body %q is not a JSON array of objects: %v", b, err)
	}
	return v
}

// Keyed returns the headers of a JSON create with an Idempotency-Key.
func Keyed(key string) map[string]string {
	return map[string]string{"Content-Type": "application/json", "Idempotency-Key": key}
}

// UserCount returns how many users the server at baseURL lists.
func UserCount(t *testing.T, baseURL string) string {
	t.Helper()
	res := Do(t, HTTP1Client, baseURL, Request{Method: "GET", Path: "/users?limit=1"})
	if res.Status != http.StatusOK {
		t.Fatalf("list users: %d %s", res.Status, res.Body)
	}
	return res.Header.Get("X-Total-Count")
}

// WantReplay fails the test unless repeat is first again, marked as replayed.
func WantReplay(t *testing.T, first, repeat Response) {
	t.Helper()
	if repeat.Status != first.Status || string(repeat.Body) != string(first.Body) {
		t.Fatalf("repeat answered %d %s, want the first answer %d %s", repeat.Status, repeat.Body, first.Status, first.Body)
	}
	if repeat.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("repeat has Idempotent-Replayed %q, want true", repeat.Header.Get("Idempotent-Replayed"))
	}
	for _, h := range []string{"Location", "ETag", "Content-Type"} {
		if repeat.Header.Get(h) != first.Header.Get(h) {
			t.Errorf("repeat has %s %q, first had %q", h, repeat.Header.Get(h), first.Header.Get(h))
		}
	}
}
