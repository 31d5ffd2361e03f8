package main

import (
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	usersv1 "usersd/gen/users/v1"
	"usersd/handlers"
)

// handlersSource is the handlers package, read by the tests below to list the routes it registers:
// net/http's ServeMux cannot list its patterns, and reading the source means a route added there is
// checked here without anyone having to remember this test.
const handlersSource = "../../handlers"

// publicWriteRoutes are the routes with a method other than GET or HEAD that need no key, each with
// the reason. Every other such route must be wrapped in protect and answer 401 without a valid key.
var publicWriteRoutes = map[string]string{
	"POST /echo": "it only answers with its body and changes nothing (the README's routes table)",
	"/":          "the catch-all of handlers.newRouteTable: it only answers a request that no route serves, 404 or 405",
}

// nonLiteralPatterns are the mux.Handle calls whose pattern is not a string literal, so that the
// method cannot be read from the source, with why each is safe. A new one fails the test until it is
// understood and added here.
var nonLiteralPatterns = map[string]string{
	"path + method": "mountRPC mounts each method of an RPC service at its own path; see mountedRPCServices",
	"pattern":       "routeTable.Handle adds the routes that addRoutes names, which this test reads, to both of its muxes",
}

// mountedRPCServices are the RPC services that routes.go mounts (by the first argument of mountRPC)
// and why their writes are covered: the Users service's methods are checked from its descriptor
// below; the others have no method that changes anything.
var mountedRPCServices = map[string]string{
	"usersPath":      "users.v1.Users: every method without NO_SIDE_EFFECTS is checked below",
	"healthPath":     "grpc.health.v1.Health: Check and Watch only read the serving status",
	"reflectionPath": "grpc.reflection.v1 and v1alpha: only describe the services",
}

// sourceRoute is one mux.Handle (or HandleFunc) call of the handlers package.
type sourceRoute struct {
	pattern   string // "" when the pattern is not a literal
	expr      string // the pattern argument as written
	protected bool   // the handler argument is protect(...)
	where     string // file:line
}

// method returns the route's method, "" for a pattern that matches every method.
func (r sourceRoute) method() string {
	method, _, ok := strings.Cut(r.pattern, " ")
	if !ok {
		return ""
	}
	return method
}

// path returns the route's path pattern.
func (r sourceRoute) path() string {
	if _, path, ok := strings.Cut(r.pattern, " "); ok {
		return path
	}
	return r.pattern
}

// readsOnly reports whether the route's method cannot change anything (RFC 9110 safe methods).
func (r sourceRoute) readsOnly() bool { return r.method() == "GET" || r.method() == "HEAD" }

// parseHandlersSource parses the non-test Go files of the handlers package.
func parseHandlersSource(t *testing.T) (*token.FileSet, []*ast.File) {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(handlersSource, "*.go"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no Go files in %s: %v", handlersSource, err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return fset, files
}

// leadingLiteral returns the string literal that an expression such as "GET /" + name starts with.
func leadingLiteral(e ast.Expr) (string, bool) {
	for {
		switch x := e.(type) {
		case *ast.BasicLit:
			if x.Kind != token.STRING {
				return "", false
			}
			s, err := strconv.Unquote(x.Value)
			return s, err == nil
		case *ast.BinaryExpr:
			if x.Op != token.ADD {
				return "", false
			}
			e = x.X
		case *ast.ParenExpr:
			e = x.X
		default:
			return "", false
		}
	}
}

// isCallOf reports whether e is a call of the function named name (an identifier or a selector's
// final name).
func isCallOf(e ast.Expr, name string) bool {
	call, ok := e.(*ast.CallExpr)
	if !ok {
		return false
	}
	switch fn := call.Fun.(type) {
	case *ast.Ident:
		return fn.Name == name
	case *ast.SelectorExpr:
		return fn.Sel.Name == name
	}
	return false
}

// sourceRoutes lists every route that the handlers package registers on a mux, and the first
// argument of every mountRPC call.
func sourceRoutes(t *testing.T) (routes []sourceRoute, mounted []string) {
	t.Helper()
	fset, files := parseHandlersSource(t)
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			if fn, ok := call.Fun.(*ast.Ident); ok && fn.Name == "mountRPC" && len(call.Args) > 0 {
				service := call.Args[0]
				if inner, ok := service.(*ast.CallExpr); ok {
					service = inner.Fun
				}
				mounted = append(mounted, types.ExprString(service))
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || (sel.Sel.Name != "Handle" && sel.Sel.Name != "HandleFunc") || len(call.Args) != 2 {
				return true
			}
			r := sourceRoute{
				expr:      types.ExprString(call.Args[0]),
				protected: isCallOf(call.Args[1], "protect"),
				where:     fset.Position(call.Pos()).String(),
			}
			if lit, ok := call.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				r.pattern, _ = strconv.Unquote(lit.Value)
			} else if prefix, ok := leadingLiteral(call.Args[0]); ok && strings.Contains(prefix, " ") {
				// "GET /" + name: the method is known even though the path is built at run time.
				method, _, _ := strings.Cut(prefix, " ")
				r.pattern = method + " " + "<" + r.expr + ">"
			}
			routes = append(routes, r)
			return true
		})
	}
	return routes, mounted
}

// concretePath turns a path pattern into a request path: {id} is the given user, any other
// wildcard 1, and {$} nothing.
func concretePath(pattern string, id int) string {
	path := strings.ReplaceAll(pattern, "{$}", "")
	path = strings.ReplaceAll(path, "{id}", strconv.Itoa(id))
	for {
		start := strings.Index(path, "{")
		end := strings.Index(path, "}")
		if start < 0 || end < start {
			return path
		}
		path = path[:start] + "1" + path[end+1:]
	}
}

// TestNoWriteRouteWithoutAKey: no route that writes can be reached without a valid key, over any
// protocol. The REST routes are read from the handlers' source and the RPCs from the service
// descriptor, so that a route or RPC added later is covered without touching this test.
func TestNoWriteRouteWithoutAKey(t *testing.T) {
	routes, mounted := sourceRoutes(t)

	t.Run("every route's method is known and every write route is protected or allow-listed", func(t *testing.T) {
		seen := map[string]bool{}
		for _, r := range routes {
			switch {
			case r.pattern == "":
				if _, ok := nonLiteralPatterns[r.expr]; !ok {
					t.Errorf("%s: mux.Handle(%s, ...): cannot tell this route's method from the source; "+
						"make the pattern a literal, or add it to nonLiteralPatterns with why it is safe", r.where, r.expr)
				}
			case r.readsOnly():
			case r.protected:
				seen[r.pattern] = true
			default:
				if _, ok := publicWriteRoutes[r.pattern]; !ok {
					t.Errorf("%s: %q may change data but is not wrapped in protect and not in publicWriteRoutes", r.where, r.pattern)
				}
				seen[r.pattern] = true
			}
		}
		for pattern := range publicWriteRoutes {
			if !seen[pattern] {
				t.Errorf("publicWriteRoutes lists %q, which routes.go no longer registers", pattern)
			}
		}
		// The parser must at least find the routes the README's routes table names; an empty list would
		// pass everything.
		for _, want := range []string{"POST /users", "PUT /users/{id}", "PATCH /users/{id}", "DELETE /users/{id}", "POST /users/{id}/posts"} {
			if !seen[want] {
				t.Errorf("the source has no protected route %q; found %d routes", want, len(routes))
			}
		}
		for _, service := range mounted {
			if _, ok := mountedRPCServices[service]; !ok {
				t.Errorf("routes.go mounts the RPC service %s, unknown to this test: make sure its writes need a key, "+
					"and add it to mountedRPCServices", service)
			}
		}
	})

	s := startServer(t)
	existing := idOf(t, s.createUser(t, "Target", "admin"))
	if res := s.do(t, http1Client, request{method: "POST", path: fmt.Sprintf("/users/%d/posts", existing), header: jsonBody, key: true, body: `{"title":"kept"}`}); res.status != http.StatusCreated {
		t.Fatalf("seed post: %d %s", res.status, res.body)
	}
	before := snapshot(t, s, existing)
	wrongKeys := []struct{ name, key string }{
		{"without a key", ""},
		{"with a wrong key", "wrong-" + testKey},
		{"with the key's last character changed", testKey[:len(testKey)-1] + "X"},
	}

	t.Run("REST", func(t *testing.T) {
		var checked int
		for _, r := range routes {
			if r.pattern == "" || strings.Contains(r.pattern, "<") {
				continue // a non-literal pattern (see above)
			}
			if _, public := publicWriteRoutes[r.pattern]; public || (r.readsOnly() && !r.protected) {
				continue
			}
			checked++
			method := r.method()
			if method == "" {
				method = "POST" // a pattern without a method takes every method, writes included
			}
			path := concretePath(r.path(), existing)
			// A body that would be accepted with the key, so that only the key can refuse it.
			body := `{"name":"Intruder"}`
			if strings.HasSuffix(path, "/posts") {
				body = `{"title":"Intruder"}`
			}
			if method == "GET" || method == "HEAD" || method == "DELETE" {
				body = ""
			}
			for _, tr := range transports {
				for _, k := range wrongKeys {
					t.Run(fmt.Sprintf("%s %s %s %s", method, path, tr.name, k.name), func(t *testing.T) {
						header := map[string]string{"Content-Type": "application/json"}
						if k.key != "" {
							header["x-api-key"] = k.key
						}
						res := s.do(t, tr.client, request{method: method, path: path, header: header, body: body})
						if res.status != http.StatusUnauthorized {
							t.Fatalf("%s (%s): %d %s, want 401", r.pattern, r.where, res.status, res.body)
						}
						if method != "HEAD" {
							res.errorMessage(t)
						}
					})
				}
			}
		}
		if checked < 6 { // the five writes of the README's routes table and /private
			t.Errorf("checked %d protected routes, want at least 6", checked)
		}
	})

	service := usersv1.File_users_v1_users_proto.Services().ByName("Users")
	if service == nil {
		t.Fatal("no service users.v1.Users in the descriptor")
	}
	var writes []protoreflect.MethodDescriptor
	methods := service.Methods()
	for i := range methods.Len() {
		m := methods.Get(i)
		options, _ := m.Options().(*descriptorpb.MethodOptions)
		if options.GetIdempotencyLevel() != descriptorpb.MethodOptions_NO_SIDE_EFFECTS {
			writes = append(writes, m)
		}
	}
	if len(writes) < 5 { // CreateUser, ReplaceUser, UpdateUser, DeleteUser, CreateUserPost
		t.Fatalf("the descriptor lists %d write methods, want at least 5", len(writes))
	}

	t.Run("RPC", func(t *testing.T) {
		for _, m := range writes {
			procedure := "/" + string(service.FullName()) + "/" + string(m.Name())
			for _, p := range rpcProtocols {
				for _, k := range wrongKeys {
					t.Run(fmt.Sprintf("%s %s %s", m.Name(), p.name, k.name), func(t *testing.T) {
						_, err := callDynamicRPC(t.Context(), s, p, procedure, m, k.key, validRequestFor(m, int32(existing)))
						rpcWantCode(t, err, connect.CodeUnauthenticated)
					})
				}
			}
		}
	})

	if after := snapshot(t, s, existing); after != before {
		t.Fatalf("requests without a valid key changed the store:\nbefore %s\nafter  %s", before, after)
	}

	// The same requests with the key succeed: only the key refused them above. Each runs on a user
	// of its own, since one of them deletes it.
	t.Run("the same RPC requests with the key are accepted", func(t *testing.T) {
		p := rpcProtocolNamed(t, "Connect binary")
		for _, m := range writes {
			id := idOf(t, s.createUser(t, "Control "+string(m.Name()), ""))
			procedure := "/" + string(service.FullName()) + "/" + string(m.Name())
			if _, err := callDynamicRPC(t.Context(), s, p, procedure, m, testKey, validRequestFor(m, int32(id))); err != nil {
				t.Errorf("%s with the key: %v (code %s)", m.Name(), err, connect.CodeOf(err))
			}
		}
	})
}

// validRequestFor builds the request message of m for a call on the user id, from the descriptor alone:
// every int32 field named id or user_id is id, and the user or post it carries gets a name or title.
func validRequestFor(m protoreflect.MethodDescriptor, id int32) *dynamicpb.Message {
	msg := dynamicpb.NewMessage(m.Input())
	fillValidFields(msg, id)
	return msg
}

func fillValidFields(msg protoreflect.Message, id int32) {
	fields := msg.Descriptor().Fields()
	for i := range fields.Len() {
		f := fields.Get(i)
		if f.Cardinality() == protoreflect.Repeated {
			continue
		}
		switch {
		case f.Kind() == protoreflect.Int32Kind && (f.Name() == "id" || f.Name() == "user_id"):
			msg.Set(f, protoreflect.ValueOfInt32(id))
		case f.Kind() == protoreflect.StringKind && (f.Name() == "name" || f.Name() == "title"):
			msg.Set(f, protoreflect.ValueOfString("Intruder"))
		case f.Kind() == protoreflect.MessageKind && f.Message().ParentFile().Package() == "users.v1":
			fillValidFields(msg.Mutable(f).Message(), id)
		}
	}
}

// callDynamicRPC calls procedure with req over protocol p, sending key in x-api-key unless it is "".
func callDynamicRPC(ctx context.Context, s *testServer, p rpcProtocol, procedure string, m protoreflect.MethodDescriptor, key string, req *dynamicpb.Message) (*connect.Response[dynamicpb.Message], error) {
	opts := slices.Clone(p.opts)
	opts = append(opts, connect.WithSchema(m), connect.WithResponseInitializer(func(spec connect.Spec, msg any) error {
		if dynamic, ok := msg.(*dynamicpb.Message); ok {
			*dynamic = *dynamicpb.NewMessage(m.Output())
		}
		return nil
	}))
	if key != "" {
		opts = append(opts, rpcWithKey(key))
	}
	client := connect.NewClient[dynamicpb.Message, dynamicpb.Message](h2cClient, s.baseURL+procedure, opts...)
	return client.CallUnary(ctx, connect.NewRequest(req))
}

// TestAPIKeysRejectNearMisses checks handlers.APIKeys at the unit level: only an exact key passes,
// however much of a valid key another shares.
func TestAPIKeysRejectNearMisses(t *testing.T) {
	const other = "second-key-for-rotation-abcdef"
	keys := handlers.NewAPIKeys(testKey, other, "")
	if keys.Len() != 2 {
		t.Fatalf("Len %d, want 2 (the empty key is ignored)", keys.Len())
	}
	for _, key := range []string{testKey, other} {
		if !keys.Valid(key) {
			t.Errorf("Valid(%q) is false", key)
		}
	}
	flipLast := testKey[:len(testKey)-1] + "X"
	flipFirst := "X" + testKey[1:]
	for _, c := range []struct{ name, key string }{
		{"empty", ""},
		{"all but the last character (a prefix)", testKey[:len(testKey)-1]},
		{"the first character only", testKey[:1]},
		{"the last character changed (the longest shared prefix)", flipLast},
		{"the first character changed (no shared prefix)", flipFirst},
		{"the key and one more character", testKey + "0"},
		{"the key twice", testKey + testKey},
		{"the key with a NUL byte after it", testKey + "\x00"},
		{"the key in upper case", strings.ToUpper(testKey)},
		{"the key with spaces around it", " " + testKey + " "},
		{"the two keys joined", testKey + "," + other},
		{"a long key that starts with the key", testKey + strings.Repeat("x", 1<<16)},
	} {
		if keys.Valid(c.key) {
			t.Errorf("Valid(%s) is true", c.name)
		}
	}
}

// TestAPIKeyComparisonIsConstantTime checks by reading handlers/auth.go that APIKeys.Valid compares
// keys in constant time: fixed-length SHA-256 digests compared with subtle.ConstantTimeCompare
// against every key, and no comparison of key text that could stop at the first difference. A
// timing measurement would be flaky; this is the property that makes the timing flat.
func TestAPIKeyComparisonIsConstantTime(t *testing.T) {
	_, files := parseHandlersSource(t)
	funcs := map[string]*ast.FuncDecl{} // methods of APIKeys by name
	for _, f := range files {
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || len(fn.Recv.List) != 1 {
				continue
			}
			if star, ok := fn.Recv.List[0].Type.(*ast.StarExpr); ok {
				if id, ok := star.X.(*ast.Ident); ok && id.Name == "APIKeys" {
					funcs[fn.Name.Name] = fn
				}
			}
		}
	}
	if funcs["Valid"] == nil {
		t.Fatal("no method (*APIKeys).Valid in the handlers package")
	}

	// Valid and the methods of APIKeys it calls, transitively.
	var body []*ast.FuncDecl
	queue, visited := []string{"Valid"}, map[string]bool{}
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		if visited[name] || funcs[name] == nil {
			continue
		}
		visited[name] = true
		body = append(body, funcs[name])
		ast.Inspect(funcs[name].Body, func(n ast.Node) bool {
			if call, ok := n.(*ast.CallExpr); ok {
				if sel, ok := call.Fun.(*ast.SelectorExpr); ok {
					queue = append(queue, sel.Sel.Name)
				}
			}
			return true
		})
	}

	forbidden := map[string]bool{
		"bytes.Equal": true, "bytes.Compare": true, "bytes.HasPrefix": true,
		"strings.EqualFold": true, "strings.Compare": true, "strings.HasPrefix": true, "strings.HasSuffix": true,
		"strings.Contains": true, "slices.Equal": true, "reflect.DeepEqual": true, "maps.Equal": true,
	}
	var constantTime, digests bool
	for _, fn := range body {
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.CallExpr:
				name := types.ExprString(x.Fun)
				switch {
				case name == "subtle.ConstantTimeCompare":
					constantTime = true
				case name == "sha256.Sum256":
					digests = true
				case forbidden[name]:
					t.Errorf("(*APIKeys).%s calls %s, which returns at the first difference", fn.Name.Name, name)
				}
			case *ast.BinaryExpr:
				// Comparing with a constant ("" or 1) says nothing about a key's content; comparing two
				// values of key material can stop at the first differing byte.
				if (x.Op == token.EQL || x.Op == token.NEQ) && !astIsBasicLit(x.X) && !astIsBasicLit(x.Y) {
					t.Errorf("(*APIKeys).%s compares %s with ==/!=; use subtle.ConstantTimeCompare", fn.Name.Name, types.ExprString(x))
				}
			case *ast.RangeStmt:
				// Every key is compared: leaving the loop at the first match would tell which key matched.
				ast.Inspect(x.Body, func(n ast.Node) bool {
					switch y := n.(type) {
					case *ast.ReturnStmt:
						t.Errorf("(*APIKeys).%s returns from inside its loop over the keys", fn.Name.Name)
					case *ast.BranchStmt:
						if y.Tok == token.BREAK {
							t.Errorf("(*APIKeys).%s breaks out of its loop over the keys", fn.Name.Name)
						}
					}
					return true
				})
			}
			return true
		})
	}
	if !constantTime {
		t.Error("(*APIKeys).Valid does not compare with subtle.ConstantTimeCompare")
	}
	if !digests {
		t.Error("(*APIKeys).Valid does not hash the key with sha256.Sum256: comparing keys of different lengths in constant time needs fixed-length digests")
	}
}

func astIsBasicLit(e ast.Expr) bool {
	_, ok := e.(*ast.BasicLit)
	return ok
}

// BenchmarkAPIKeyCheck times APIKeys.Valid for keys that share nothing, a long prefix, or everything
// with a valid key. Not a test: compare the numbers with benchstat, e.g.
//
//	go test -run '^$' -bench APIKeyCheck -count 10 ./cmd/usersd | benchstat -col /key -
func BenchmarkAPIKeyCheck(b *testing.B) {
	valid := strings.Repeat("k", 64)
	keys := handlers.NewAPIKeys(valid, "another-valid-key")
	for _, c := range []struct{ name, key string }{
		{"key=no-shared-prefix", "X" + valid[1:]},
		{"key=long-shared-prefix", valid[:63] + "X"},
		{"key=exact", valid},
		{"key=short", "k"},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				keys.Valid(c.key)
			}
		})
	}
}
