package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	usersv1 "usersd/gen/users/v1"
	"usersd/internal/apitest"
	"usersd/scim"
	"usersd/store/sqlstore"
	"usersd/webhooks"
)

// routeTestKey is the one valid key of the service under test.
const routeTestKey = "route-test-key-2b7e151628aed2a6"

// routeTestReceiver is the receiver of the webhook subscriptions the route tests make: its policy
// allows loopback http, and nothing delivers to it (the engine does not run here).
const routeTestReceiver = "http://127.0.0.1:9/hooks"

// publicWrites are the routes that take a method other than GET or HEAD (or every method) and
// answer without a key, each with why that is safe. A public route that may write and is not listed
// here fails TestEveryWriteIsRefusedWithoutAValidKey; so does an entry that no route matches any
// more. RPC methods that the proto marks NO_SIDE_EFFECTS are reads and need no entry.
var publicWrites = map[string]string{
	"POST /echo":                                                     "it answers with the JSON it was sent and changes nothing (docs/API.md#the-routes)",
	"/grpc.health.v1.Health/Check":                                   "gRPC health: answers the serving status",
	"/grpc.health.v1.Health/Watch":                                   "gRPC health: streams the serving status",
	"/grpc.health.v1.Health/List":                                    "gRPC health: answers the serving status of every service",
	"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo":      "gRPC reflection: describes the services",
	"/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo": "gRPC reflection: describes the services",
}

// wrongKeys are the keys that every protected route must refuse.
var wrongKeys = []struct{ name, key string }{
	{"without a key", ""},
	{"with another key of the same length", strings.Repeat("x", len(routeTestKey))},
	{"with the key's last character changed", routeTestKey[:len(routeTestKey)-1] + "X"},
}

// TestEveryWriteIsRefusedWithoutAValidKey builds the real service with New, takes the list of every
// route from the table New built, and sends every route that may write (and every protected one) a
// request over a real listener without a valid key: REST must answer 401 with an {"error": ...}
// body, RPC unauthenticated on every protocol. The rule is this test's own: a route needs a key
// unless its method is GET or HEAD, it is an RPC method the proto marks NO_SIDE_EFFECTS, or
// publicWrites lists it. The same requests with the key then pass the check, so that only the key
// refused them.
func TestEveryWriteIsRefusedWithoutAValidKey(t *testing.T) {
	svc, srv := startRouteTestService(t)

	var drive []route
	registered := map[string]route{}
	for _, r := range svc.routes {
		registered[r.pattern] = r
		switch {
		case r.access == accessProtected:
			drive = append(drive, r)
		case r.access != accessPublic:
			t.Errorf("%q was registered with access %v, neither public nor protected", r.pattern, r.access)
		case needsKey(r.pattern):
			t.Errorf("%q is public (%q) but may change data: register it with protected, or add it to publicWrites with why it is safe",
				r.pattern, r.why)
			drive = append(drive, r) // and show what it does without a key
		}
	}
	for pattern := range publicWrites {
		if r, ok := registered[pattern]; !ok || r.access != accessPublic {
			t.Errorf("publicWrites lists %q, which is not a public route any more", pattern)
		}
	}
	// An empty or short list would pass everything: the writes docs/API.md#the-routes names, /private and every
	// method of the Users service must be there.
	for _, want := range []string{"POST /users", "PUT /users/{id}", "PATCH /users/{id}", "DELETE /users/{id}", "POST /users/{id}/posts", "GET /private"} {
		if registered[want].access != accessProtected {
			t.Errorf("%q is not a protected route; the table has %d routes", want, len(svc.routes))
		}
	}
	users := usersv1.File_users_v1_users_proto.Services().ByName("Users")
	var rpcWrites int
	for i := range users.Methods().Len() {
		m := users.Methods().Get(i)
		if _, ok := registered["/"+string(users.FullName())+"/"+string(m.Name())]; !ok {
			t.Errorf("the Users method %s is not mounted", m.Name())
		}
		if !readsOnly(m) {
			rpcWrites++
		}
	}
	if rpcWrites < 5 { // CreateUser, ReplaceUser, UpdateUser, DeleteUser, CreateUserPost
		t.Errorf("the proto has %d Users methods that write, want at least 5", rpcWrites)
	}

	admin := &routeClient{baseURL: srv.URL, http: srv.Client(), key: routeTestKey}
	existing := admin.createUser(t, "Target")
	if res := admin.rest(t, "POST", fmt.Sprintf("/users/%d/posts", existing), `{"title":"kept"}`); res.status != http.StatusCreated {
		t.Fatalf("seed post: %d %s", res.status, res.body)
	}
	before := admin.snapshot(t, existing)

	h2c := h2cClient()
	t.Cleanup(h2c.CloseIdleConnections)
	transports := []struct {
		name   string
		client *http.Client
	}{{"HTTP/1.1", srv.Client()}, {"h2c", h2c}}
	var driven int
	for _, r := range drive {
		if m, ok := rpcMethodOf(r.pattern); ok {
			driven++
			for _, p := range rpcTestProtocols {
				for _, k := range wrongKeys {
					t.Run(fmt.Sprintf("%s %s %s", r.pattern, p.name, k.name), func(t *testing.T) {
						err := callRPC(t, h2c, srv.URL, r.pattern, m, p.opts, k.key, existing)
						if connect.CodeOf(err) != connect.CodeUnauthenticated {
							t.Fatalf("%v (code %s), want unauthenticated", err, connect.CodeOf(err))
						}
					})
				}
			}
			continue
		}
		driven++
		method, path, body := restRequestFor(r.pattern, existing)
		for _, tr := range transports {
			for _, k := range wrongKeys {
				t.Run(fmt.Sprintf("%s %s %s %s", method, path, tr.name, k.name), func(t *testing.T) {
					c := &routeClient{baseURL: srv.URL, http: tr.client, key: k.key}
					res := c.rest(t, method, path, body)
					if res.status != http.StatusUnauthorized {
						t.Fatalf("%q answered %d %s, want 401", r.pattern, res.status, res.body)
					}
					switch {
					case strings.HasPrefix(path, scim.Prefix+"/"):
						if !isSCIMError(res.body, http.StatusUnauthorized) {
							t.Fatalf("body %s, want SCIM's error schema with status 401", res.body)
						}
					case method != http.MethodHead:
						if _, reason, err := apitest.CheckErrorBody(res.body); err != nil || reason != "UNAUTHENTICATED" {
							t.Fatalf("body %s (%v), want the error body of reason UNAUTHENTICATED", res.body, err)
						}
					}
				})
			}
		}
	}
	if driven < 6+rpcWrites {
		t.Errorf("drove %d routes, want at least %d: the REST writes, /private and the write RPCs", driven, 6+rpcWrites)
	}
	if after := admin.snapshot(t, existing); after != before {
		t.Errorf("requests without a valid key changed the store:\nbefore %s\nafter  %s", before, after)
	}

	// With the key, the same requests pass the check; each runs on a user of its own, since one of
	// them deletes it.
	t.Run("the same requests with the key pass the check", func(t *testing.T) {
		for _, r := range drive {
			id := admin.createUser(t, "Control")
			if strings.Contains(strings.ToLower(r.pattern), "webhook") {
				id = admin.createWebhook(t) // the routes of subscriptions take the id of one
			}
			if m, ok := rpcMethodOf(r.pattern); ok {
				// A live user cannot be restored: the rules' not found shows that the method ran.
				if err := callRPC(t, h2c, srv.URL, r.pattern, m, nil, routeTestKey, id); err != nil && !(m.Name() == "UndeleteUser" && connect.CodeOf(err) == connect.CodeNotFound) {
					t.Errorf("%s with the key: %v (code %s)", r.pattern, err, connect.CodeOf(err))
				}
				continue
			}
			method, path, body := restRequestFor(r.pattern, id)
			res := admin.rest(t, method, path, body)
			if strings.HasSuffix(r.pattern, ":undelete") && res.status == http.StatusNotFound && strings.Contains(string(res.body), `"USER_NOT_FOUND"`) {
				continue // a live user cannot be restored: the rules' not found shows that the route ran
			}
			if res.status == http.StatusUnauthorized || res.status == http.StatusNotFound || res.status == http.StatusMethodNotAllowed {
				t.Errorf("%s %s with the key: %d %s; want the route to take it", method, path, res.status, res.body)
			}
		}
	})
}

// TestAPublicRouteThatMayWriteMustSayWhy checks the table itself: a public route whose method may
// change data is refused unless it comes with a reason, and New would fail with the refusal.
func TestAPublicRouteThatMayWriteMustSayWhy(t *testing.T) {
	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	for _, c := range []struct {
		pattern, why string
		refused      bool
	}{
		{"GET /a", "", false},
		{"HEAD /a", "", false},
		{"POST /a", "", true},
		{"PUT /a", "", true},
		{"PATCH /a", "", true},
		{"DELETE /a", "", true},
		{"OPTIONS /a", "", true},
		{"/a", "", true}, // no method: takes every method
		{"GET\t/a", "", false},
		{"POST /a", "it changes nothing", false},
		{"/a", "it changes nothing", false},
	} {
		t.Run(fmt.Sprintf("%q why %q", c.pattern, c.why), func(t *testing.T) {
			table := newRouteTable(testGate(t, "k"), slog.New(slog.DiscardHandler), nil, 0)
			table.public(c.pattern, ok, c.why)
			if refused := table.err != nil; refused != c.refused {
				t.Fatalf("refused %v (%v), want %v", refused, table.err, c.refused)
			}
			if listed := len(table.routes) == 1; listed == c.refused {
				t.Fatalf("listed %v, want %v", listed, !c.refused)
			}
		})
	}
}

// TestAProtectedRouteMustNeedAScope: a protected route without a scope would answer anyone, so the
// table refuses it and New would fail.
func TestAProtectedRouteMustNeedAScope(t *testing.T) {
	table := newRouteTable(testGate(t, "k"), slog.New(slog.DiscardHandler), nil, 0)
	table.protected("POST /a", 0, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	if table.err == nil || len(table.routes) != 0 {
		t.Fatalf("a protected route without a scope was taken (err %v, %d routes)", table.err, len(table.routes))
	}
}

// needsKey is the rule TestEveryWriteIsRefusedWithoutAValidKey holds the table to, written apart
// from the table's own: only GET and HEAD, NO_SIDE_EFFECTS methods and publicWrites go without a key.
func needsKey(pattern string) bool {
	if _, ok := publicWrites[pattern]; ok {
		return false
	}
	if m, ok := rpcMethodOf(pattern); ok {
		return !readsOnly(m)
	}
	method, _, _ := strings.Cut(pattern, " ")
	return method != http.MethodGet && method != http.MethodHead
}

func readsOnly(m protoreflect.MethodDescriptor) bool {
	options, _ := m.Options().(*descriptorpb.MethodOptions)
	return options.GetIdempotencyLevel() == descriptorpb.MethodOptions_NO_SIDE_EFFECTS
}

// rpcMethodOf returns the RPC method that pattern mounts: a pattern without an HTTP method whose
// path is /package.Service/Method of a service in the global registry.
func rpcMethodOf(pattern string) (protoreflect.MethodDescriptor, bool) {
	if strings.ContainsAny(pattern, " \t") {
		return nil, false
	}
	service, method, ok := strings.Cut(strings.TrimPrefix(pattern, "/"), "/")
	if !ok {
		return nil, false
	}
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(service + "." + method))
	if err != nil {
		return nil, false
	}
	m, ok := d.(protoreflect.MethodDescriptor)
	return m, ok
}

// rpcTestProtocols are the protocols every protected RPC is called over.
var rpcTestProtocols = []struct {
	name string
	opts []connect.ClientOption
}{
	{"Connect binary", nil},
	{"Connect JSON", []connect.ClientOption{connect.WithProtoJSON()}},
	{"gRPC", []connect.ClientOption{connect.WithGRPC()}},
	{"gRPC-Web", []connect.ClientOption{connect.WithGRPCWeb()}},
}

// callRPC calls the unary method m at procedure with a request that is valid for the user id,
// sending key in x-api-key unless it is "". It is connect's own client, the one the generated
// client wraps, given m's schema, so that any method the table lists can be called.
func callRPC(t *testing.T, client *http.Client, baseURL, procedure string, m protoreflect.MethodDescriptor, opts []connect.ClientOption, key string, id int) error {
	t.Helper()
	if m.IsStreamingClient() || m.IsStreamingServer() {
		t.Fatalf("%s streams: this test calls only unary methods; add a streaming call for it", procedure)
	}
	opts = append(append([]connect.ClientOption{}, opts...), connect.WithSchema(m),
		connect.WithResponseInitializer(func(_ connect.Spec, msg any) error {
			if dynamic, ok := msg.(*dynamicpb.Message); ok {
				*dynamic = *dynamicpb.NewMessage(m.Output())
			}
			return nil
		}))
	msg := dynamicpb.NewMessage(m.Input())
	fillValidFields(msg, int32(id))
	req := connect.NewRequest(msg)
	if key != "" {
		req.Header().Set(APIKeyHeader, key)
	}
	_, err := connect.NewClient[dynamicpb.Message, dynamicpb.Message](client, baseURL+procedure, opts...).CallUnary(context.Background(), req)
	return err
}

// fillValidFields makes msg a request that the service would accept for the user id: every int32
// field named id or user_id is id, and the user or post it carries gets a name or title; a batch
// names the user once (ids) or carries one request so filled (requests).
func fillValidFields(msg protoreflect.Message, id int32) {
	fields := msg.Descriptor().Fields()
	for i := range fields.Len() {
		f := fields.Get(i)
		if f.Cardinality() == protoreflect.Repeated {
			switch {
			case f.IsList() && f.Kind() == protoreflect.Int32Kind && f.Name() == "ids":
				msg.Mutable(f).List().Append(protoreflect.ValueOfInt32(id))
			case f.IsList() && f.Kind() == protoreflect.MessageKind && f.Message().ParentFile().Package() == "users.v1":
				list := msg.Mutable(f).List()
				item := list.NewElement()
				fillValidFields(item.Message(), id)
				list.Append(item)
			}
			continue
		}
		switch {
		case f.Kind() == protoreflect.Int32Kind && (f.Name() == "id" || f.Name() == "user_id"):
			msg.Set(f, protoreflect.ValueOfInt32(id))
		case f.Kind() == protoreflect.StringKind && (f.Name() == "name" || f.Name() == "title"):
			msg.Set(f, protoreflect.ValueOfString("Intruder"))
		case f.Kind() == protoreflect.StringKind && f.Name() == "url":
			msg.Set(f, protoreflect.ValueOfString(routeTestReceiver))
		case f.Kind() == protoreflect.MessageKind && f.Message().ParentFile().Package() == "users.v1":
			fillValidFields(msg.Mutable(f).Message(), id)
		}
	}
}

// restRequestFor turns a route's pattern into a request the route would accept for the user id (or
// webhook subscription id): its method (POST for a pattern that takes every method), its path with
// {id} the id and any other wildcard 1, and a body naming a user, a post or a receiver.
func restRequestFor(pattern string, id int) (method, path, body string) {
	method, path, ok := strings.Cut(pattern, " ")
	if !ok {
		method, path = http.MethodPost, pattern
	}
	path = strings.ReplaceAll(path, "{$}", "")
	path = strings.ReplaceAll(path, "{id}", strconv.Itoa(id))
	for {
		start, end := strings.Index(path, "{"), strings.Index(path, "}")
		if start < 0 || end < start {
			break
		}
		path = path[:start] + "1" + path[end+1:]
	}
	switch {
	case method == http.MethodGet || method == http.MethodHead || method == http.MethodDelete:
		body = ""
	case strings.HasSuffix(path, "/posts"):
		body = `{"title":"Intruder"}`
	case strings.HasSuffix(path, ":replay"):
		body = `{"afterSequence":"0"}`
	case strings.HasSuffix(path, ":rotateSecret"):
		body = `{}`
	case strings.HasPrefix(path, "/webhooks"):
		body = `{"url":"` + routeTestReceiver + `"}`
	default:
		body = `{"name":"Intruder"}`
	}
	return method, path, body
}

// isSCIMError reports whether body is SCIM's error schema (RFC 7644 section 3.12) with status.
func isSCIMError(body []byte, status int) bool {
	var e struct {
		Schemas []string `json:"schemas"`
		Status  string   `json:"status"`
		Detail  string   `json:"detail"`
	}
	return json.Unmarshal(body, &e) == nil && len(e.Schemas) == 1 && e.Schemas[0] == "urn:ietf:params:scim:api:messages:2.0:Error" &&
		e.Status == strconv.Itoa(status) && e.Detail != ""
}

// startRouteTestService builds the service with New on a SQLite store of its own and serves it on
// a loopback listener that speaks HTTP/1.1 and h2c, as the real server does.
func startRouteTestService(t *testing.T) (*Service, *httptest.Server) {
	t.Helper()
	st, err := sqlstore.Open(context.Background(), filepath.Join(t.TempDir(), "users.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	svc, err := New(Config{Store: st, Keys: testKeys(routeTestKey), Logger: slog.New(slog.DiscardHandler),
		Webhooks: webhooks.NewService(st, webhooks.Policy{AllowHTTP: true, AllowPrivate: true})})
	if err != nil {
		t.Fatal(err)
	}
	return svc, startH2C(t, svc)
}

// routeClient sends REST requests to the service, with key in x-api-key unless it is "".
type routeClient struct {
	baseURL string
	http    *http.Client
	key     string
}

type restAnswer struct {
	status int
	body   []byte
}

func (c *routeClient) rest(t *testing.T, method, path, body string) restAnswer {
	t.Helper()
	req, err := http.NewRequest(method, c.baseURL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.key != "" {
		req.Header.Set(APIKeyHeader, c.key)
	}
	res, err := c.http.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", method, path, err)
	}
	return restAnswer{status: res.StatusCode, body: b}
}

// createUser creates a user over REST and returns its id.
func (c *routeClient) createUser(t *testing.T, name string) int {
	t.Helper()
	res := c.rest(t, http.MethodPost, "/users", fmt.Sprintf(`{"name":%q}`, name))
	var u struct{ ID int }
	if err := json.Unmarshal(res.body, &u); res.status != http.StatusCreated || err != nil || u.ID == 0 {
		t.Fatalf("create user: %d %s (%v)", res.status, res.body, err)
	}
	return u.ID
}

// createWebhook makes a webhook subscription over REST and returns its id.
func (c *routeClient) createWebhook(t *testing.T) int {
	t.Helper()
	res := c.rest(t, http.MethodPost, "/webhooks", `{"url":"`+routeTestReceiver+`"}`)
	var w struct{ ID int }
	if err := json.Unmarshal(res.body, &w); res.status != http.StatusCreated || err != nil || w.ID == 0 {
		t.Fatalf("create webhook: %d %s (%v)", res.status, res.body, err)
	}
	return w.ID
}

// snapshot is every user and every post of the user id, as the public reads show them.
func (c *routeClient) snapshot(t *testing.T, id int) string {
	t.Helper()
	users := c.rest(t, http.MethodGet, "/users?limit=100", "")
	posts := c.rest(t, http.MethodGet, fmt.Sprintf("/users/%d/posts?limit=100", id), "")
	return fmt.Sprintf("users %d %s\nposts %d %s", users.status, users.body, posts.status, posts.body)
}
