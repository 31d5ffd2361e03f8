package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protowire"

	"usersd/internal/apitest"
)

// hostileKind says what shape of answer a hostile request must get.
type hostileKind int

const (
	// hostileREST is the service's REST error: {"error": "..."} as application/json.
	hostileREST hostileKind = iota
	// hostileBare is an answer of net/http itself, written before any handler of the service runs
	// (malformed request line or headers, a header block over the limit): only its status is the
	// service's concern, so only the status is checked, and that no middleware saw the request.
	hostileBare
	// hostileConnect is a Connect protocol error body {"code": ..., "message": ...}.
	hostileConnect
	// hostileGRPC is a gRPC answer: HTTP 200 with the code in grpc-status (trailers, or the headers of
	// a trailers-only answer).
	hostileGRPC
	// hostileOK is a request that is hostile but legal: its status is pinned, plus any check.
	hostileOK
)

// hostileCase is one hostile request and the exact answer it must get.
type hostileCase struct {
	name   string
	send   func(t *testing.T) response
	status int
	kind   hostileKind
	code   connect.Code                     // for hostileConnect and hostileGRPC
	check  func(t *testing.T, res response) // more checks, optional
}

// TestHostileInputs sends requests that a careless or malicious client might send to every route and
// RPC: wrong types, huge numbers, NUL bytes, invalid UTF-8, deep nesting, huge bodies, query and
// header floods, path traversal, wrong media types and lying gRPC frames. Each gets its exact status,
// none changes the store, and the server still answers a normal request afterwards.
// TestRESTRejectsBadRequests covers the ordinary bad requests; none of its cases is repeated here.
func TestHostileInputs(t *testing.T) {
	s := startServer(t)
	existing := apitest.IDOf(t, s.CreateUser(t, "existing", "admin"))
	user := fmt.Sprintf("/users/%d", existing)
	posts := user + "/posts"
	if res := s.Do(t, apitest.HTTP1Client, request{Method: "POST", Path: posts, Header: apitest.JSONBody, Key: true, Body: `{"title":"kept"}`}); res.Status != http.StatusCreated {
		t.Fatalf("seed post: %d %s", res.Status, res.Body)
	}
	before := apitest.Snapshot(t, s.BaseURL, existing)

	h1 := func(req request) func(*testing.T) response {
		return func(t *testing.T) response { t.Helper(); return s.Do(t, apitest.HTTP1Client, req) }
	}
	h2 := func(req request) func(*testing.T) response {
		return func(t *testing.T) response { t.Helper(); return s.Do(t, apitest.H2CClient, req) }
	}
	raw := func(text string) func(*testing.T) response {
		return func(t *testing.T) response { t.Helper(); return s.rawHTTP1(t, text, false) }
	}
	// rawCut sends text and then ends the request's side of the connection: for bodies that promise
	// more than they hold.
	rawCut := func(text string) func(*testing.T) response {
		return func(t *testing.T) response { t.Helper(); return s.rawHTTP1(t, text, true) }
	}
	grpc := func(path string, header map[string]string, body []byte) func(*testing.T) response {
		return func(t *testing.T) response { t.Helper(); return s.rawGRPCAnswer(t, path, header, body) }
	}

	keyed := map[string]string{"Content-Type": "application/json", "x-api-key": apitest.Key}
	withType := func(contentType string) map[string]string {
		return map[string]string{"Content-Type": contentType}
	}
	const connectPath = "/users.v1.Users/"
	getUserMsg := protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), uint64(existing))

	tenMB := strings.Repeat("x", 10<<20)
	deepArrays := strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000)
	openArrays := strings.Repeat("[", 100_000)
	deepObjects := strings.Repeat(`{"a":`, 100_000) + "1" + strings.Repeat("}", 100_000)
	thousandParams := func(name func(i int) string) string {
		params := make([]string, 1000)
		for i := range params {
			params[i] = name(i) + "=1"
		}
		return strings.Join(params, "&")
	}
	distinctParams := thousandParams(func(i int) string { return "p" + strconv.Itoa(i) })
	sameParam := thousandParams(func(int) string { return "page" })
	headerFlood := func(n int, first string) string {
		var b strings.Builder
		b.WriteString(first)
		b.WriteString("Host: usersd\r\n")
		for i := range n {
			fmt.Fprintf(&b, "X-Flood-%d: v\r\n", i)
		}
		b.WriteString("Connection: close\r\n\r\n")
		return b.String()
	}
	get := func(path string) string { // a raw HTTP/1.1 GET of path, exactly as written
		return "GET " + path + " HTTP/1.1\r\nHost: usersd\r\nConnection: close\r\n\r\n"
	}
	validUTF8JSON := func(t *testing.T, res response) {
		if !utf8.Valid(res.Body) {
			t.Errorf("the answer %q is not UTF-8, so not JSON (RFC 8259 section 8.1)", res.Body)
		}
		apitest.DecodeObject(t, res.Body)
	}

	cases := []hostileCase{
		// Wrong types, on every route that reads a body or a query, and on Connect JSON.
		{name: "a create whose name is an object", send: h1(request{Method: "POST", Path: "/users", Header: apitest.JSONBody, Key: true, Body: `{"name":{"first":"x"}}`}), status: 400},
		{name: "a create whose name is a number", send: h2(request{Method: "POST", Path: "/users", Header: apitest.JSONBody, Key: true, Body: `{"name":1,"createdAt":1}`}), status: 400},
		{name: "a replace whose role is a boolean", send: h1(request{Method: "PUT", Path: user, Header: apitest.JSONBody, Key: true, Body: `{"name":"x","role":false}`}), status: 400},
		{name: "a patch whose role is a number", send: h2(request{Method: "PATCH", Path: user, Header: apitest.JSONBody, Key: true, Body: `{"role":123}`}), status: 400},
		{name: "a post whose title is an array", send: h1(request{Method: "POST", Path: posts, Header: apitest.JSONBody, Key: true, Body: `{"title":["t"]}`}), status: 400},
		{name: "a list whose page is a boolean", send: h2(request{Method: "GET", Path: "/users?page=true"}), status: 400},
		{name: "Connect JSON CreateUser whose user is a string", send: h2(request{Method: "POST", Path: connectPath + "CreateUser", Header: keyed, Body: `{"user":"x"}`}), status: 400, kind: hostileConnect, code: connect.CodeInvalidArgument},
		{name: "Connect JSON GetUser whose id is a word", send: h1(request{Method: "POST", Path: connectPath + "GetUser", Header: apitest.JSONBody, Body: `{"id":"abc"}`}), status: 400, kind: hostileConnect, code: connect.CodeInvalidArgument},
		{name: "Connect JSON UpdateUser whose updateMask is a number", send: h2(request{Method: "POST", Path: connectPath + "UpdateUser", Header: keyed, Body: fmt.Sprintf(`{"id":%d,"user":{"role":"x"},"updateMask":5}`, existing)}), status: 400, kind: hostileConnect, code: connect.CodeInvalidArgument},

		// Huge and odd numbers: beyond int32, beyond float64, negative zero, fractions.
		{name: "a replace whose body id is past int32", send: h1(request{Method: "PUT", Path: user, Header: apitest.JSONBody, Key: true, Body: `{"id":2147483648,"name":"x"}`}), status: 400},
		{name: "a replace whose body id is 1e400", send: h2(request{Method: "PUT", Path: user, Header: apitest.JSONBody, Key: true, Body: `{"id":1e400,"name":"x"}`}), status: 400},
		{name: "a patch whose body id is 1.5", send: h1(request{Method: "PATCH", Path: user, Header: apitest.JSONBody, Key: true, Body: `{"id":1.5}`}), status: 400},
		{name: "a post whose userId is 1e400", send: h2(request{Method: "POST", Path: posts, Header: apitest.JSONBody, Key: true, Body: `{"title":"t","userId":1e400}`}), status: 400},
		{name: "a path id past uint64", send: h1(request{Method: "GET", Path: "/users/99999999999999999999999"}), status: 400},
		{name: "a path id of negative zero", send: h2(request{Method: "GET", Path: "/users/-0/posts"}), status: 400},
		{name: "a delete of a path id past int32", send: h1(request{Method: "DELETE", Path: "/users/4294967297", Key: true}), status: 400},
		{name: "a limit of 1e400", send: h2(request{Method: "GET", Path: "/users?limit=1e400"}), status: 400},
		{name: "a page of negative zero", send: h1(request{Method: "GET", Path: posts + "?page=-0"}), status: 400},
		{name: "Connect JSON GetUser with id past int32", send: h2(request{Method: "POST", Path: connectPath + "GetUser", Header: apitest.JSONBody, Body: `{"id":2147483648}`}), status: 400, kind: hostileConnect, code: connect.CodeInvalidArgument},
		{name: "Connect JSON GetUser with id 1e400", send: h1(request{Method: "POST", Path: connectPath + "GetUser", Header: apitest.JSONBody, Body: `{"id":1e400}`}), status: 400, kind: hostileConnect, code: connect.CodeInvalidArgument},
		{name: "Connect JSON GetUser with id 1.5", send: h2(request{Method: "POST", Path: connectPath + "GetUser", Header: apitest.JSONBody, Body: `{"id":1.5}`}), status: 400, kind: hostileConnect, code: connect.CodeInvalidArgument},
		// -0 is a valid JSON spelling of 0, and 0 is not a valid id.
		{name: "Connect JSON GetUser with id -0", send: h1(request{Method: "POST", Path: connectPath + "GetUser", Header: apitest.JSONBody, Body: `{"id":-0}`}), status: 400, kind: hostileConnect, code: connect.CodeInvalidArgument},

		// NUL bytes: raw, escaped and percent-encoded.
		{name: "a create with a raw NUL byte in the name", send: h1(request{Method: "POST", Path: "/users", Header: apitest.JSONBody, Key: true, Body: "{\"name\":\"a\x00b\"}"}), status: 400},
		{name: `a create with \u0000 in the role`, send: h2(request{Method: "POST", Path: "/users", Header: apitest.JSONBody, Key: true, Body: `{"name":"x","role":"\u0000"}`}), status: 400},
		{name: `a patch with \u0000 in the role`, send: h1(request{Method: "PATCH", Path: user, Header: apitest.JSONBody, Key: true, Body: `{"role":"a\u0000"}`}), status: 400},
		{name: `a post with \u0000 in the title`, send: h2(request{Method: "POST", Path: posts, Header: apitest.JSONBody, Key: true, Body: `{"title":"\u0000"}`}), status: 400},
		{name: `a post with \u0000 in the body`, send: h1(request{Method: "POST", Path: posts, Header: apitest.JSONBody, Key: true, Body: `{"title":"t","body":"a\u0000"}`}), status: 400},
		{name: "an echo with a raw NUL byte in a string", send: h2(request{Method: "POST", Path: "/echo", Header: apitest.JSONBody, Body: "{\"a\":\"a\x00b\"}"}), status: 400},
		{name: "a path id of %00", send: h1(request{Method: "GET", Path: "/users/%00"}), status: 400},
		{name: "a page of %00", send: h2(request{Method: "GET", Path: "/users?page=%00"}), status: 400},
		// A role with a NUL can never be stored, and PostgreSQL cannot even compare one: a filter
		// that no user could match is refused, as docs/API.md#the-routes says, on every backend.
		{name: "a role filter of %00 is refused", send: h1(request{Method: "GET", Path: "/users?role=a%00b"}), status: 400},
		{name: "a raw NUL byte in the request line", send: raw("GET /users/1\x00 HTTP/1.1\r\nHost: usersd\r\nConnection: close\r\n\r\n"), status: 400, kind: hostileBare},
		{name: "a raw NUL byte in a header value", send: raw("GET /info HTTP/1.1\r\nHost: usersd\r\nX-A: a\x00b\r\nConnection: close\r\n\r\n"), status: 400, kind: hostileBare},
		{name: `Connect JSON CreateUser with \u0000 in the name`, send: h2(request{Method: "POST", Path: connectPath + "CreateUser", Header: keyed, Body: `{"user":{"name":"a\u0000b"}}`}), status: 400, kind: hostileConnect, code: connect.CodeInvalidArgument},

		// Invalid UTF-8: raw bytes in JSON strings, in query values and in path segments.
		{name: "a replace with invalid UTF-8 in the name", send: h1(request{Method: "PUT", Path: user, Header: apitest.JSONBody, Key: true, Body: "{\"name\":\"\xc3\x28\"}"}), status: 400},
		{name: "a patch with invalid UTF-8 in the role", send: h2(request{Method: "PATCH", Path: user, Header: apitest.JSONBody, Key: true, Body: "{\"role\":\"\xff\"}"}), status: 400},
		{name: "a post with invalid UTF-8 in the body", send: h1(request{Method: "POST", Path: posts, Header: apitest.JSONBody, Key: true, Body: "{\"title\":\"t\",\"body\":\"\xed\xa0\x80\"}"}), status: 400},
		{name: "a create with a lone surrogate escape", send: h2(request{Method: "POST", Path: "/users", Header: apitest.JSONBody, Key: true, Body: `{"name":"\ud800"}`}), status: 400},
		{name: "an echo with invalid UTF-8 in a string", send: h1(request{Method: "POST", Path: "/echo", Header: apitest.JSONBody, Body: "{\"a\":\"\xff\xfe\"}"}), status: 400},
		{name: "an echo with an invalid UTF-8 member name", send: h2(request{Method: "POST", Path: "/echo", Header: apitest.JSONBody, Body: "{\"\xc0\xaf\":1}"}), status: 400},
		{name: "a sort of %FF", send: h1(request{Method: "GET", Path: "/users?sort=%FF"}), status: 400},
		{name: "a query parameter named %FF", send: h2(request{Method: "GET", Path: posts + "?%FF=1"}), status: 400},
		// Invalid UTF-8 in a query value is refused, as the RPCs refuse it in a string field.
		{name: "a role filter of %FF", send: h1(request{Method: "GET", Path: "/users?role=%FF"}), status: 400, kind: hostileREST},
		{name: "a raw invalid UTF-8 query value", send: raw(get("/users?role=\xff")), status: 400, kind: hostileREST},
		{name: "a raw invalid UTF-8 path id", send: raw(get("/users/\xff")), status: 400},
		{name: "a raw invalid UTF-8 path", send: raw(get("/\xff\xfe")), status: 404},
		{name: "a raw invalid UTF-8 path id of posts", send: raw("POST /users/\xc3\x28/posts HTTP/1.1\r\nHost: usersd\r\nX-Api-Key: " + apitest.Key + "\r\nContent-Type: application/json\r\nContent-Length: 13\r\nConnection: close\r\n\r\n{\"title\":\"t\"}"), status: 400},
		{name: "an encoded invalid UTF-8 path id", send: h2(request{Method: "GET", Path: "/users/%FF/posts"}), status: 400},
		{name: "a raw invalid UTF-8 header value reaches /info as valid JSON", send: raw("GET /info HTTP/1.1\r\nHost: usersd\r\nX-A: a\xffb\r\nConnection: close\r\n\r\n"), status: 200, kind: hostileOK, check: validUTF8JSON},
		{name: "Connect JSON CreateUser with invalid UTF-8 in the name", send: h1(request{Method: "POST", Path: connectPath + "CreateUser", Header: keyed, Body: "{\"user\":{\"name\":\"\xff\"}}"}), status: 400, kind: hostileConnect, code: connect.CodeInvalidArgument},
		{name: "gRPC ListUsers with invalid UTF-8 in the role", send: grpc(connectPath+"ListUsers", nil, hostileFrame(0, -1, protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "\xff"))), status: 200, kind: hostileGRPC, code: connect.CodeInvalidArgument},

		// Deep nesting: 100,000 levels.
		{name: "an echo of 100k nested arrays", send: h1(request{Method: "POST", Path: "/echo", Header: apitest.JSONBody, Body: deepArrays}), status: 400},
		{name: "an echo of 100k unclosed arrays", send: h2(request{Method: "POST", Path: "/echo", Header: apitest.JSONBody, Body: openArrays}), status: 400},
		{name: "an echo of 100k nested objects", send: h1(request{Method: "POST", Path: "/echo", Header: apitest.JSONBody, Body: deepObjects}), status: 400},
		{name: "a create of 100k nested arrays", send: h2(request{Method: "POST", Path: "/users", Header: apitest.JSONBody, Key: true, Body: deepArrays}), status: 400},
		{name: "a patch whose role is 100k nested arrays", send: h1(request{Method: "PATCH", Path: user, Header: apitest.JSONBody, Key: true, Body: `{"role":` + deepArrays + `}`}), status: 400},
		{name: "Connect JSON CreateUser of 100k nested objects", send: h2(request{Method: "POST", Path: connectPath + "CreateUser", Header: keyed, Body: deepObjects}), status: 400, kind: hostileConnect, code: connect.CodeInvalidArgument},

		// 10 MB bodies: 413 on REST, resource_exhausted on RPC.
		{name: "a replace of 10 MB", send: h2(request{Method: "PUT", Path: user, Header: apitest.JSONBody, Key: true, Body: `{"name":"` + tenMB + `"}`}), status: 413},
		{name: "a patch of 10 MB", send: h1(request{Method: "PATCH", Path: user, Header: apitest.JSONBody, Key: true, Body: `{"role":"` + tenMB + `"}`}), status: 413},
		{name: "a post of 10 MB", send: h2(request{Method: "POST", Path: posts, Header: apitest.JSONBody, Key: true, Body: `{"title":"t","body":"` + tenMB + `"}`}), status: 413},
		{name: "an echo of 10 MB", send: h1(request{Method: "POST", Path: "/echo", Header: apitest.JSONBody, Body: `"` + tenMB + `"`}), status: 413},
		{name: "Connect JSON CreateUser of 10 MB", send: h2(request{Method: "POST", Path: connectPath + "CreateUser", Header: keyed, Body: `{"user":{"name":"` + tenMB + `"}}`}), status: 429, kind: hostileConnect, code: connect.CodeResourceExhausted},
		{name: "gRPC CreateUser of 10 MB", send: grpc(connectPath+"CreateUser", map[string]string{"x-api-key": apitest.Key}, hostileFrame(0, -1, []byte(tenMB))), status: 200, kind: hostileGRPC, code: connect.CodeResourceExhausted},

		// 1000 query parameters, and a query string over the header limit.
		{name: "a list with 1000 unknown parameters", send: h1(request{Method: "GET", Path: "/users?" + distinctParams}), status: 400},
		{name: "a list with page given 1000 times", send: h2(request{Method: "GET", Path: "/users?" + sameParam}), status: 400},
		{name: "a list of posts with 1000 unknown parameters", send: h1(request{Method: "GET", Path: posts + "?" + distinctParams}), status: 400},
		{name: "a health check ignores 1000 parameters", send: h2(request{Method: "GET", Path: "/health?" + distinctParams}), status: 200, kind: hostileOK, check: func(t *testing.T, res response) {
			if string(res.Body) != `{"ok":true}` {
				t.Errorf("body %s", res.Body)
			}
		}},
		{name: "a request line of 100 KB", send: h1(request{Method: "GET", Path: "/users?role=" + strings.Repeat("a", 100<<10)}), status: 431, kind: hostileBare},

		// Header floods over HTTP/1.1 (Go's HTTP/2 client refuses to send a header list over the
		// limit that the server announces, so h2c cannot be flooded from here).
		{name: "10,000 headers", send: raw(headerFlood(10_000, "GET /health HTTP/1.1\r\n")), status: 431, kind: hostileBare},
		{name: "10,000 headers on a keyless write", send: raw(headerFlood(10_000, "DELETE "+user+" HTTP/1.1\r\n")), status: 431, kind: hostileBare},
		{name: "one header of 100 KB", send: raw("GET /users HTTP/1.1\r\nHost: usersd\r\nX-Big: " + strings.Repeat("a", 100<<10) + "\r\nConnection: close\r\n\r\n"), status: 431, kind: hostileBare},
		// Since Go 1.27 net/http also refuses more than 500 header values (http.DefaultMaxHeaderValueCount),
		// however few bytes they take.
		{name: "600 small headers", send: raw(headerFlood(600, "GET /info HTTP/1.1\r\n")), status: 431, kind: hostileBare},
		{name: "400 headers under both limits reach /info", send: raw(headerFlood(400, "GET /info HTTP/1.1\r\n")), status: 200, kind: hostileOK, check: func(t *testing.T, res response) {
			if !strings.Contains(string(res.Body), `"x-flood-399":"v"`) {
				t.Errorf("/info lacks the last header: %.200s", res.Body)
			}
		}},

		// Path traversal, raw and encoded: nothing outside the embedded public folder is served.
		{name: "raw /../go.mod", send: raw(get("/../go.mod")), status: 404},
		{name: "/%2e%2e/go.mod", send: raw(get("/%2e%2e/go.mod")), status: 404},
		{name: "/..%2fgo.mod", send: raw(get("/..%2fgo.mod")), status: 404},
		{name: "/%2e%2e%2f%2e%2e%2fetc%2fpasswd", send: raw(get("/%2e%2e%2f%2e%2e%2fetc%2fpasswd")), status: 404},
		{name: "//etc/passwd", send: raw(get("//etc/passwd")), status: 404},
		{name: "/users/1/../../go.mod", send: raw(get("/users/1/../../go.mod")), status: 404},
		{name: `raw /..\..\go.mod`, send: raw(get(`/..\..\go.mod`)), status: 404},
		{name: "an absolute URL with ../", send: raw(get("http://usersd/../../go.mod")), status: 404},
		{name: "/.git/config", send: raw(get("/.git/config")), status: 404},
		{name: "/%2e/", send: raw(get("/%2e/")), status: 404},
		{name: "the source of the embedded folder", send: h1(request{Method: "GET", Path: "/web.go"}), status: 404},
		{name: "the public folder by name", send: h2(request{Method: "GET", Path: "/public/index.html"}), status: 404},
		{name: "/index.html%00.txt", send: h1(request{Method: "GET", Path: "/index.html%00.txt"}), status: 404},
		// Percent-encoding where none is needed makes a second path for one resource: 404.
		{name: "/users/%2e%2e is neither an id nor a step up", send: raw(get("/users/%2e%2e")), status: 404},
		{name: "/users/%3N... is not a second path of /users/N...", send: raw(get("/users/" + encodedFirstDigit(existing))), status: 404},
		{name: "a keyed delete of /users/%3N... deletes nothing", send: raw("DELETE /users/" + encodedFirstDigit(existing) + " HTTP/1.1\r\nHost: usersd\r\nX-Api-Key: " + apitest.Key + "\r\nConnection: close\r\n\r\n"), status: 404},
		{name: "/app%2ejs is not /app.js", send: raw(get("/app%2ejs")), status: 404},
		{name: "/users/1%2F2 is an id with a slash, not /users/1/2", send: raw(get("/users/1%2F2")), status: 400},
		// A path with dot segments or doubled slashes names no resource: 404, before any route or
		// key check runs (net/http's mux would redirect it, with an HTML body).
		{name: "/index.html/.. is not a path of the page", send: raw(get("/index.html/..")), status: 404},
		{name: "a keyed delete with dot segments deletes nothing", send: raw("DELETE /users/1/../" + strconv.Itoa(existing) + " HTTP/1.1\r\nHost: usersd\r\nX-Api-Key: " + apitest.Key + "\r\nConnection: close\r\n\r\n"), status: 404},
		{name: "//users is not /users", send: raw(get("//users")), status: 404},
		{name: "/users/. is not /users", send: raw(get("/users/.")), status: 404},

		// Wrong media types.
		{name: "a create as multipart", send: h1(request{Method: "POST", Path: "/users", Header: withType("multipart/form-data; boundary=x"), Key: true, Body: "--x\r\nContent-Disposition: form-data; name=\"name\"\r\n\r\nx\r\n--x--\r\n"}), status: 415},
		{name: "a replace as a form", send: h2(request{Method: "PUT", Path: user, Header: withType("application/x-www-form-urlencoded"), Key: true, Body: "name=x"}), status: 415},
		{name: "a patch in latin1", send: h1(request{Method: "PATCH", Path: user, Header: withType("application/merge-patch+json; charset=latin1"), Key: true, Body: `{"role":"x"}`}), status: 415},
		{name: "a post without a content type", send: h2(request{Method: "POST", Path: posts, Key: true, Body: `{"title":"t"}`}), status: 415},
		{name: "a post as text/json", send: h1(request{Method: "POST", Path: posts, Header: withType("text/json"), Key: true, Body: `{"title":"t"}`}), status: 415},
		{name: "an echo with a malformed content type", send: h2(request{Method: "POST", Path: "/echo", Header: withType("application/json;;"), Body: `{}`}), status: 415},
		{name: "an echo without a content type", send: h1(request{Method: "POST", Path: "/echo", Body: `{}`}), status: 415},
		// connect-go answers an unknown media type with a bare 415 and an Accept-Post header.
		{name: "Connect CreateUser as text/plain", send: h2(request{Method: "POST", Path: connectPath + "CreateUser", Header: map[string]string{"Content-Type": "text/plain", "x-api-key": apitest.Key}, Body: `{"user":{"name":"x"}}`}), status: 415, kind: hostileOK, check: hostileAcceptsPost},
		{name: "Connect GetUser without a content type", send: h1(request{Method: "POST", Path: connectPath + "GetUser", Body: fmt.Sprintf(`{"id":%d}`, existing)}), status: 415, kind: hostileOK, check: hostileAcceptsPost},

		// gRPC frames that lie about themselves, and what connect-go v1.21.1 answers to each.
		{name: "gRPC frame declaring 100 bytes and holding 2", send: grpc(connectPath+"GetUser", nil, hostileFrame(0, 100, getUserMsg)), status: 200, kind: hostileGRPC, code: connect.CodeInternal},
		{name: "gRPC frame declaring 4 GB", send: grpc(connectPath+"GetUser", nil, hostileFrame(0, 1<<32-1, getUserMsg)), status: 200, kind: hostileGRPC, code: connect.CodeResourceExhausted},
		{name: "gRPC frame declaring 4 GB to a keyed write", send: grpc(connectPath+"DeleteUser", map[string]string{"x-api-key": apitest.Key}, hostileFrame(0, 1<<32-1, getUserMsg)), status: 200, kind: hostileGRPC, code: connect.CodeResourceExhausted},
		{name: "gRPC frame flagged compressed without grpc-encoding", send: grpc(connectPath+"GetUser", nil, hostileFrame(1, -1, getUserMsg)), status: 200, kind: hostileGRPC, code: connect.CodeInternal},
		{name: "gRPC frame cut inside its 5-byte prefix", send: grpc(connectPath+"GetUser", nil, []byte{0, 0, 0}), status: 200, kind: hostileGRPC, code: connect.CodeInternal},
		{name: "gRPC call with no frame at all", send: grpc(connectPath+"GetUser", nil, nil), status: 200, kind: hostileGRPC, code: connect.CodeUnimplemented},
		{name: "gRPC unary call with two frames", send: grpc(connectPath+"GetUser", nil, append(hostileFrame(0, -1, getUserMsg), hostileFrame(0, -1, getUserMsg)...)), status: 200, kind: hostileGRPC, code: connect.CodeUnimplemented},
		{name: "gRPC frame that is not protobuf", send: grpc(connectPath+"GetUser", nil, hostileFrame(0, -1, []byte{0xff, 0xff, 0xff})), status: 200, kind: hostileGRPC, code: connect.CodeInvalidArgument},
		{name: "gRPC frame flagged compressed with gzip that is not gzip", send: grpc(connectPath+"GetUser", map[string]string{"grpc-encoding": "gzip"}, hostileFrame(1, -1, getUserMsg)), status: 200, kind: hostileGRPC, code: connect.CodeInvalidArgument},
		{name: "gRPC with an unsupported grpc-encoding", send: grpc(connectPath+"GetUser", map[string]string{"grpc-encoding": "br"}, hostileFrame(0, -1, getUserMsg)), status: 200, kind: hostileGRPC, code: connect.CodeUnimplemented},
		{name: "gRPC with a malformed grpc-timeout", send: grpc(connectPath+"GetUser", map[string]string{"grpc-timeout": "soon"}, hostileFrame(0, -1, getUserMsg)), status: 200, kind: hostileGRPC, code: connect.CodeInvalidArgument},
		{name: "gRPC health check with a lying frame", send: grpc("/grpc.health.v1.Health/Check", nil, hostileFrame(0, 100, nil)), status: 200, kind: hostileGRPC, code: connect.CodeInternal},
		{name: "gRPC over HTTP/1.1, chunked, with a frame declaring 100 bytes and holding 2", send: raw(hostileGRPCOverHTTP1("GetUser", hostileChunked(hostileFrame(0, 100, getUserMsg)))), status: 200, kind: hostileGRPC, code: connect.CodeInternal},
		{name: "gRPC over HTTP/1.1 with a malformed chunk size", send: raw(hostileGRPCOverHTTP1("GetUser", "zz\r\n"+string(hostileFrame(0, -1, getUserMsg))+"\r\n0\r\n\r\n")), status: 200, kind: hostileGRPC, code: connect.CodeInvalidArgument},
		{name: "gRPC to an unknown procedure of the service", send: grpc(connectPath+"StealUsers", nil, hostileFrame(0, -1, nil)), status: 200, kind: hostileGRPC, code: connect.CodeUnimplemented},
		{name: "gRPC to an unknown service", send: grpc("/users.v2.Users/GetUser", nil, hostileFrame(0, -1, nil)), status: 200, kind: hostileGRPC, code: connect.CodeUnimplemented},

		// Bad input of the Connect protocol.
		{name: "Connect JSON CreateUser with malformed JSON", send: h2(request{Method: "POST", Path: connectPath + "CreateUser", Header: keyed, Body: `{"user":`}), status: 400, kind: hostileConnect, code: connect.CodeInvalidArgument},
		{name: "Connect binary GetUser that is not protobuf", send: h2(request{Method: "POST", Path: connectPath + "GetUser", Header: withType("application/proto"), Body: "\xff\xff\xff"}), status: 400, kind: hostileConnect, code: connect.CodeInvalidArgument},
		{name: "Connect binary health check that is not protobuf", send: h1(request{Method: "POST", Path: "/grpc.health.v1.Health/Check", Header: withType("application/proto"), Body: "\xff\xff\xff"}), status: 400, kind: hostileConnect, code: connect.CodeInvalidArgument},
		{name: "Connect JSON CreateUser with an empty body", send: h1(request{Method: "POST", Path: connectPath + "CreateUser", Header: keyed}), status: 400, kind: hostileConnect, code: connect.CodeInvalidArgument},
		{name: "Connect to an unknown procedure", send: h2(request{Method: "POST", Path: connectPath + "StealUsers", Header: keyed, Body: `{}`}), status: 404, kind: hostileConnect, code: connect.CodeUnimplemented},
		{name: "Connect GET of a write procedure with the key", send: h1(request{Method: "GET", Path: connectPath + "CreateUser?connect=v1&encoding=json&message=" + url.QueryEscape(`{"user":{"name":"x"}}`), Key: true}), status: 405, kind: hostileOK, check: func(t *testing.T, res response) {
			if got := res.Header.Get("Allow"); got != "POST" {
				t.Errorf("Allow %q, want POST", got)
			}
		}},
		{name: "Connect GET of a write procedure without a key", send: h2(request{Method: "GET", Path: connectPath + "DeleteUser?connect=v1&encoding=json&message=" + url.QueryEscape(fmt.Sprintf(`{"id":%d}`, existing))}), status: 401, kind: hostileConnect, code: connect.CodeUnauthenticated},
		{name: "Connect GET with a malformed message", send: h1(request{Method: "GET", Path: connectPath + "GetUser?connect=v1&encoding=json&message=" + url.QueryEscape(`{"id":`)}), status: 400, kind: hostileConnect, code: connect.CodeInvalidArgument},
		{name: "Connect GET with a message that is not base64", send: h2(request{Method: "GET", Path: connectPath + "GetUser?connect=v1&encoding=proto&base64=1&message=%21%21%21"}), status: 400, kind: hostileConnect, code: connect.CodeInvalidArgument},
		{name: "Connect POST over HTTP/1.1 with a malformed chunk size", send: raw("POST " + connectPath + "GetUser HTTP/1.1\r\nHost: usersd\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\nzz\r\n{}\r\n0\r\n\r\n"), status: 400, kind: hostileConnect, code: connect.CodeInvalidArgument},
		{name: "Connect GET with 1000 extra parameters", send: h1(request{Method: "GET", Path: connectPath + "GetUser?connect=v1&encoding=json&message=" + url.QueryEscape(fmt.Sprintf(`{"id":%d}`, existing)) + "&" + distinctParams}), status: 200, kind: hostileOK},
		{name: "Connect with an unknown protocol version", send: h2(request{Method: "POST", Path: connectPath + "GetUser", Header: map[string]string{"Content-Type": "application/json", "Connect-Protocol-Version": "2"}, Body: fmt.Sprintf(`{"id":%d}`, existing)}), status: 400, kind: hostileConnect, code: connect.CodeInvalidArgument},
		{name: "Connect with a malformed timeout", send: h1(request{Method: "POST", Path: connectPath + "GetUser", Header: map[string]string{"Content-Type": "application/json", "Connect-Timeout-Ms": "-1"}, Body: fmt.Sprintf(`{"id":%d}`, existing)}), status: 400, kind: hostileConnect, code: connect.CodeInvalidArgument},
		{name: "Connect with a body that claims gzip", send: h2(request{Method: "POST", Path: connectPath + "GetUser", Header: map[string]string{"Content-Type": "application/json", "Content-Encoding": "gzip"}, Body: fmt.Sprintf(`{"id":%d}`, existing)}), status: 400, kind: hostileConnect, code: connect.CodeInvalidArgument},

		// Bodies that lie about their length or framing over HTTP/1.1.
		{name: "two different Content-Lengths", send: raw("POST /echo HTTP/1.1\r\nHost: usersd\r\nContent-Type: application/json\r\nContent-Length: 2\r\nContent-Length: 3\r\nConnection: close\r\n\r\n{}"), status: 400, kind: hostileBare},
		{name: "a Content-Length past int64", send: raw("POST /echo HTTP/1.1\r\nHost: usersd\r\nContent-Type: application/json\r\nContent-Length: 99999999999999999999\r\nConnection: close\r\n\r\n{}"), status: 400, kind: hostileBare},
		{name: "an echo whose body is shorter than its Content-Length", send: rawCut("POST /echo HTTP/1.1\r\nHost: usersd\r\nContent-Type: application/json\r\nContent-Length: 100\r\nConnection: close\r\n\r\n{\"a\":1}"), status: 400},
		{name: "a keyed create whose body is shorter than its Content-Length", send: rawCut("POST /users HTTP/1.1\r\nHost: usersd\r\nX-Api-Key: " + apitest.Key + "\r\nContent-Type: application/json\r\nContent-Length: 10485760\r\nConnection: close\r\n\r\n{\"name\":\"x\"}"), status: 400},
		{name: "an echo with a malformed chunk size", send: raw("POST /echo HTTP/1.1\r\nHost: usersd\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\nzz\r\n{}\r\n0\r\n\r\n"), status: 400},
	}

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := c.send(t)
			if res.Status != c.status {
				t.Fatalf("got %d %.300q, want %d", res.Status, res.Body, c.status)
			}
			switch c.kind {
			case hostileREST:
				res.ErrorMessage(t)
				if got := res.Header.Get("Content-Type"); got != "application/json" {
					t.Errorf("Content-Type %q, want application/json", got)
				}
			case hostileBare:
				// The service's first middleware sets X-Request-Id on every answer it writes.
				if id := res.Header.Get("X-Request-Id"); id != "" {
					t.Errorf("X-Request-Id %q: the service answered, not net/http; check the body %q", id, res.Body)
				}
			case hostileConnect:
				if code := hostileConnectCode(t, res.Body); code != c.code.String() {
					t.Errorf("code %q, want %q", code, c.code)
				}
			case hostileGRPC:
				if got, want := res.Header.Get("Grpc-Status"), strconv.Itoa(int(c.code)); got != want {
					t.Errorf("grpc-status %q (message %q), want %s (%s)", got, res.Header.Get("Grpc-Message"), want, c.code)
				}
				hostileCheckMessage(t, res.Header.Get("Grpc-Message"))
			}
			if c.check != nil {
				c.check(t, res)
			}
		})
	}

	if after := apitest.Snapshot(t, s.BaseURL, existing); after != before {
		t.Fatalf("hostile requests changed the store:\nbefore %s\nafter  %s", before, after)
	}
	t.Run("the server still answers normal requests", func(t *testing.T) {
		for _, tr := range apitest.Transports {
			if res := s.Do(t, tr.Client, request{Method: "GET", Path: user}); res.Status != http.StatusOK {
				t.Errorf("%s: GET %s: %d %s", tr.Name, user, res.Status, res.Body)
			}
		}
		if answers := apitest.RawGRPC(t, s.BaseURL, connectPath+"GetUser", getUserMsg); len(answers) != 1 {
			t.Errorf("gRPC GetUser: %d answers", len(answers))
		}
	})
}

// encodedFirstDigit is id with its first digit percent-encoded: 12 is "%312".
func encodedFirstDigit(id int) string {
	digits := strconv.Itoa(id)
	return fmt.Sprintf("%%%X", digits[0]) + digits[1:]
}

// hostileConnectCode returns the code of a Connect error body {"code": ..., "message": ...} and checks
// that the message leaks nothing.
func hostileConnectCode(t *testing.T, body []byte) string {
	t.Helper()
	code, message := apitest.ConnectErrorBody(t, body)
	hostileCheckMessage(t, message) // tolerates "syntax error", which JSON errors rightly say
	return code
}

// hostileCheckMessage fails the test if an RPC error message holds store or runtime detail. It is
// rpcLeakWords without "syntax error", which here is the JSON parser's own, accurate, words.
func hostileCheckMessage(t *testing.T, msg string) {
	t.Helper()
	for _, w := range apitest.RPCLeakWords {
		if w != "syntax error" && strings.Contains(strings.ToLower(msg), w) {
			t.Errorf("error message %q contains %q", msg, w)
		}
	}
}

// hostileAcceptsPost checks connect-go's answer to a media type it does not speak: it lists those it does.
func hostileAcceptsPost(t *testing.T, res response) {
	t.Helper()
	if !strings.Contains(res.Header.Get("Accept-Post"), "application/json") {
		t.Errorf("Accept-Post %q does not list application/json", res.Header.Get("Accept-Post"))
	}
}

// hostileFrame returns msg in a gRPC frame: the flags byte (1 = compressed) and a length prefix that
// says declared bytes follow, or the true length when declared is negative.
func hostileFrame(flags byte, declared int64, msg []byte) []byte {
	if declared < 0 {
		declared = int64(len(msg))
	}
	frame := make([]byte, 5, 5+len(msg))
	frame[0] = flags
	binary.BigEndian.PutUint32(frame[1:], uint32(declared))
	return append(frame, msg...)
}

// hostileChunked returns body as one chunk of the chunked transfer coding, ended by the last chunk.
func hostileChunked(body []byte) string {
	return fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(body), body)
}

// hostileGRPCOverHTTP1 returns a raw HTTP/1.1 gRPC call of the Users method named method; body is
// already in the chunked coding.
func hostileGRPCOverHTTP1(method, body string) string {
	return "POST /users.v1.Users/" + method + " HTTP/1.1\r\nHost: usersd\r\nContent-Type: application/grpc\r\nTE: trailers\r\n" +
		"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n" + body
}

// rawGRPCAnswer sends body, as is, as the request body of a gRPC call to path over h2c and returns
// the answer with its trailers merged into the header (a trailers-only answer has them there already).
// Unlike apitest.RawGRPC it accepts any answer, for calls that must fail.
func (s *testServer) rawGRPCAnswer(t *testing.T, path string, header map[string]string, body []byte) response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "POST", s.BaseURL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("TE", "trailers")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := apitest.H2CClient.Do(req)
	if err != nil {
		t.Fatalf("gRPC %s: %v", path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("gRPC %s: read answer: %v", path, err)
	}
	merged := res.Header.Clone()
	for k, v := range res.Trailer {
		merged[k] = v
	}
	return response{Status: res.StatusCode, Header: merged, Body: b, Proto: res.Proto}
}

// rawHTTP1 writes text, which may hold bytes that http.Client refuses to send (raw invalid UTF-8 or
// NUL in the request line, header floods, lying lengths), on a new TCP connection and reads one
// HTTP/1.1 answer. halfClose then ends the client's side of the connection, as a client that stops
// sending mid-body does. Writing runs beside reading: a server that answers early (431) and hangs up
// must not lose its answer to a blocked writer.
func (s *testServer) rawHTTP1(t *testing.T, text string, halfClose bool) response {
	t.Helper()
	conn, err := net.DialTimeout("tcp", strings.TrimPrefix(s.BaseURL, "http://"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	go func() {
		if _, err := io.WriteString(conn, text); err == nil && halfClose {
			conn.(*net.TCPConn).CloseWrite()
		}
	}()
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no HTTP answer to %.80q: %v", text, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("read the answer to %.80q: %v", text, err)
	}
	for k, v := range res.Trailer { // gRPC over HTTP/1.1 sends grpc-status as a chunked trailer
		res.Header[k] = v
	}
	return response{Status: res.StatusCode, Header: res.Header, Body: body, Proto: res.Proto}
}
