package handlers

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"connectrpc.com/connect"

	usersv1 "usersd/gen/users/v1"
	"usersd/internal/apitest"
)

// TestSecurityHeadersOnEveryAnswer: REST answers, errors and static files all carry the headers that
// stop a browser from sniffing, framing or leaking the page's address.
func TestSecurityHeadersOnEveryAnswer(t *testing.T) {
	s := startServer(t)
	id := apitest.IDOf(t, s.CreateUser(t, "headers", ""))
	for _, req := range []request{
		{Method: "GET", Path: "/"},
		{Method: "GET", Path: "/users"},
		{Method: "GET", Path: fmt.Sprintf("/users/%d", id)},
		{Method: "GET", Path: "/users/999999"},
		{Method: "POST", Path: "/users", Header: apitest.JSONBody, Body: `{"name":"x"}`},
		{Method: "GET", Path: "/no/such/path"},
		{Method: "GET", Path: "/health"},
		// gRPC answers go without the headers; a gRPC content type sent elsewhere must not take them away.
		{Method: "GET", Path: "/", Header: map[string]string{"Content-Type": "application/grpc"}},
		{Method: "GET", Path: fmt.Sprintf("/users/%d", id), Header: map[string]string{"Content-Type": "application/grpc+proto"}},
		{Method: "POST", Path: "/users", Header: map[string]string{"Content-Type": "application/grpc"}, Body: `{"name":"x"}`},
	} {
		res := s.Do(t, apitest.HTTP1Client, req)
		for name, want := range map[string]string{
			"X-Content-Type-Options": "nosniff",
			"Referrer-Policy":        "no-referrer",
		} {
			if got := res.Header.Get(name); got != want {
				t.Errorf("%s %s: %s %q, want %q", req.Method, req.Path, name, got, want)
			}
		}
		csp := res.Header.Get("Content-Security-Policy")
		for _, directive := range []string{"default-src 'self'", "script-src 'self'", "frame-ancestors 'none'", "object-src 'none'"} {
			if !strings.Contains(csp, directive) {
				t.Errorf("%s %s: Content-Security-Policy %q lacks %q", req.Method, req.Path, csp, directive)
			}
		}
		if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
			t.Errorf("%s %s: Content-Security-Policy %q allows inline or eval'd script", req.Method, req.Path, csp)
		}
	}
}

// TestCORS: with no origins configured, a browser on another origin gets no permission; with one,
// that origin (and only it) may call REST and RPC routes with the service's headers, and can read
// the headers the service answers with.
func TestCORS(t *testing.T) {
	// preflight asks as a browser does: header names lowercased and sorted (Fetch standard).
	preflight := func(s *testServer, origin, method, path, headers string) response {
		names := strings.Split(headers, ",")
		slices.Sort(names)
		return s.Do(t, apitest.HTTP1Client, request{Method: "OPTIONS", Path: path, Header: map[string]string{
			"Origin": origin, "Access-Control-Request-Method": method, "Access-Control-Request-Headers": strings.Join(names, ","),
		}})
	}
	t.Run("off by default", func(t *testing.T) {
		s := startServer(t)
		res := preflight(s, "https://app.example", "POST", "/users", "content-type,x-api-key")
		if got := res.Header.Get("Access-Control-Allow-Origin"); got != "" {
			t.Fatalf("a preflight from another origin was allowed (%q) with no origins configured", got)
		}
		get := s.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: "/users", Header: map[string]string{"Origin": "https://app.example"}})
		if get.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Fatal("a cross-origin read was allowed with no origins configured")
		}
	})
	t.Run("configured origins", func(t *testing.T) {
		s := startServerWith(t, Config{CORSOrigins: []string{"https://app.example", "https://admin.example"}})
		for _, c := range []struct{ method, path, headers string }{
			{"POST", "/users", "content-type,x-api-key,idempotency-key"},
			{"PATCH", "/users/1", "content-type,x-api-key,if-match"},
			{"DELETE", "/users/1", "x-api-key,if-match"},
			{"POST", "/users.v1.Users/CreateUser", "content-type,connect-protocol-version,x-api-key"},
			{"POST", "/users.v1.Users/GetUser", "content-type,x-grpc-web,x-user-agent"},
		} {
			res := preflight(s, "https://app.example", c.method, c.path, c.headers)
			if res.Status/100 != 2 || res.Header.Get("Access-Control-Allow-Origin") != "https://app.example" {
				t.Errorf("preflight %s %s: %d, allow-origin %q", c.method, c.path, res.Status, res.Header.Get("Access-Control-Allow-Origin"))
			}
			allowed := strings.ToLower(res.Header.Get("Access-Control-Allow-Headers"))
			for _, h := range strings.Split(c.headers, ",") {
				if !strings.Contains(allowed, h) {
					t.Errorf("preflight %s %s: header %s not allowed (%q)", c.method, c.path, h, allowed)
				}
			}
		}
		if res := preflight(s, "https://evil.example", "POST", "/users", "content-type,x-api-key"); res.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("an origin that is not configured was allowed: %q", res.Header.Get("Access-Control-Allow-Origin"))
		}
		created := s.Do(t, apitest.HTTP1Client, request{Method: "POST", Path: "/users", Header: map[string]string{
			"Origin": "https://admin.example", "Content-Type": "application/json"}, Body: `{"name":"cors"}`, Key: true})
		if created.Status != http.StatusCreated || created.Header.Get("Access-Control-Allow-Origin") != "https://admin.example" {
			t.Fatalf("cross-origin create: %d, allow-origin %q", created.Status, created.Header.Get("Access-Control-Allow-Origin"))
		}
		exposed := strings.ToLower(created.Header.Get("Access-Control-Expose-Headers"))
		for _, h := range []string{"etag", "link", "x-total-count", "location", "grpc-status", "grpc-message", "idempotent-replayed"} {
			if !strings.Contains(exposed, h) {
				t.Errorf("Access-Control-Expose-Headers %q lacks %s", exposed, h)
			}
		}
	})
}

// TestThePageIsCachedAndNeedsNoInlineScript: the page's files revalidate with their content's tag,
// and the page holds nothing that its strict Content-Security-Policy would block.
func TestThePageIsCachedAndNeedsNoInlineScript(t *testing.T) {
	s := startServer(t)
	for _, path := range []string{"/", "/app.js", "/app.css"} {
		res := s.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: path})
		tag := res.Header.Get("ETag")
		if res.Status != http.StatusOK || len(tag) < 10 || res.Header.Get("Cache-Control") != "no-cache" {
			t.Fatalf("GET %s: %d, ETag %q, Cache-Control %q", path, res.Status, tag, res.Header.Get("Cache-Control"))
		}
		again := s.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: path, Header: map[string]string{"If-None-Match": tag}})
		if again.Status != http.StatusNotModified || len(again.Body) != 0 {
			t.Fatalf("GET %s with its tag: %d, %d bytes; want 304 and no body", path, again.Status, len(again.Body))
		}
	}
	page := string(s.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: "/"}).Body)
	for _, inline := range []string{"<script>", "<script type=\"module\">", " style=", "<style", "javascript:", " onclick=", " onload="} {
		if strings.Contains(page, inline) {
			t.Errorf("index.html holds %q, which the Content-Security-Policy blocks", inline)
		}
	}
	if !strings.Contains(page, `<script type="module" src="/app.js"></script>`) {
		t.Error("index.html does not load /app.js")
	}
}

// TestStaticFilesAnswerOneRangeNotMany: a single range is served as 206; many small ranges, which
// would make a multipart answer many times the file's size, get the file itself.
func TestStaticFilesAnswerOneRangeNotMany(t *testing.T) {
	s := startServer(t)
	whole := s.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: "/app.js"})
	if whole.Status != http.StatusOK || len(whole.Body) < 1000 {
		t.Fatalf("GET /app.js: %d, %d bytes", whole.Status, len(whole.Body))
	}
	one := s.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: "/app.js", Header: map[string]string{"Range": "bytes=10-19"}})
	if one.Status != http.StatusPartialContent || string(one.Body) != string(whole.Body[10:20]) {
		t.Fatalf("one range: %d %q, want 206 %q", one.Status, one.Body, whole.Body[10:20])
	}
	ranges := make([]string, 500)
	for i := range ranges {
		ranges[i] = fmt.Sprintf("%d-%d", 2*i, 2*i)
	}
	many := s.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: "/app.js", Header: map[string]string{"Range": "bytes=" + strings.Join(ranges, ",")}})
	if many.Status != http.StatusOK || len(many.Body) != len(whole.Body) {
		t.Fatalf("500 one-byte ranges: %d, %d bytes (%s); want the file itself, 200 and %d bytes",
			many.Status, len(many.Body), many.Header.Get("Content-Type"), len(whole.Body))
	}
}

// TestSecurityHeadersOnRPCAnswersBrowsersRead: Connect and gRPC-Web answers, which pages read,
// carry the browser headers; gRPC answers, which no browser can read, go without them.
func TestSecurityHeadersOnRPCAnswersBrowsersRead(t *testing.T) {
	s := startServer(t)
	id := apitest.IDOf(t, s.CreateUser(t, "rpc headers", ""))
	for _, p := range apitest.RPCProtocols {
		var header http.Header
		capture := connect.WithInterceptors(connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
			return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
				res, err := next(ctx, req)
				if err == nil {
					header = res.Header()
				}
				return res, err
			}
		}))
		if _, err := s.RPCClient(p, "", capture).GetUser(t.Context(), &usersv1.GetUserRequest{Id: int32(id)}); err != nil {
			t.Fatalf("%s: %v", p.Name, err)
		}
		got, want := header.Get("X-Content-Type-Options"), "nosniff"
		if p.Name == "gRPC" {
			want = ""
		}
		if got != want || (header.Get("Content-Security-Policy") == "") != (want == "") {
			t.Errorf("%s: X-Content-Type-Options %q and Content-Security-Policy %q; want the browser headers only where a browser reads",
				p.Name, got, header.Get("Content-Security-Policy"))
		}
	}
}
