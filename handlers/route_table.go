// The route table: a route is added as public or as protected, never without that choice, and with
// the scope a caller needs (users.read, users.write, or none for the service's own routes); an RPC
// service is mounted through it, so that it alone knows which paths are RPCs; and a route that
// streams says so as it is added, so that it alone decides which requests shed their deadline. It
// keeps the list of what was added, so that tests can drive every route instead of reading the
// source.
package handlers

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"connectrpc.com/connect"

	"usersd/auth"
	"usersd/handlers/watchslots"
)

// access is who may call a route. Its zero value is no choice at all; the table never stores it.
type access int

const (
	accessPublic    access = iota + 1 // anyone; a read of users, anyone while reads are public
	accessProtected                   // only a request with a valid credential that holds the route's scope
)

func (a access) String() string {
	switch a {
	case accessPublic:
		return "public"
	case accessProtected:
		return "protected"
	}
	return fmt.Sprintf("access(%d)", int(a))
}

// route is one entry of the table, as registered.
type route struct {
	pattern string
	access  access
	why     string // why a public route that may write needs no key; "" for the others
	// scope is what a caller needs: users.read to read users, users.write to change them; none for
	// the service's own routes (health, the OpenAPI document, the page), which answer anyone.
	scope auth.Scopes
	// stream says that the route's answer lasts as long as its client watches: it sheds the request
	// deadline, and keeps its connection's deadlines itself (see streamWriter).
	stream bool
	// keyAsBearer lets the route's callers send their API key as Authorization: Bearer (SCIM).
	keyAsBearer bool
}

// routeTable holds every route twice. serving also has a catch-all, so that a request is matched
// once and a miss reaches answerMiss; known has only the routes, and tells answerMiss whether a
// miss is a 404 or a 405 and what Allow holds. (Asking one mux for the handler first and then
// letting it serve matched every request twice.)
//
// Routes are added only by public, read, watch, protected and rpc. Each wraps the handler in the
// credential check itself, so there is no separate wrapper to forget, and public refuses a route
// that may write unless it is given a reason.
type routeTable struct {
	serving, known *http.ServeMux
	auth           *authorizer
	errs           *errorWriter
	// watchHeartbeat is the longest a stream stays silent, which its write deadline allows for.
	watchHeartbeat time.Duration
	// watchSlots shares the watches out among clients; nil caps nothing.
	watchSlots *watchslots.Slots
	// rpcPaths are the paths under which RPC services are mounted.
	rpcPaths []string
	// clientStreams are the paths of the RPC methods whose client sends a stream of messages.
	clientStreams map[string]bool
	// customMethods are the custom methods by the path they are served at (see addCustomMethod).
	customMethods map[string]*customMethodsAt
	routes        []route
	err           error // every refused registration; New fails with it
}

func newRouteTable(gate *auth.Gate, logger *slog.Logger, metrics *metrics, watchHeartbeat time.Duration) *routeTable {
	t := &routeTable{serving: http.NewServeMux(), known: http.NewServeMux(), watchHeartbeat: watchHeartbeat}
	t.errs = &errorWriter{logger: logger, rpc: connect.NewErrorWriter(), routes: t}
	t.auth = &authorizer{gate: gate, errs: t.errs, metrics: metrics}
	// The catch-all is not a route of the table: it only answers what no route serves, with an error.
	t.serving.Handle("/", answerMiss(t.known, t.errs))
	return t
}

// public adds one of the service's own routes, which answers anyone whatever the settings. A
// pattern that may write (see mayWrite) needs why it is safe without a key; without one the route
// is refused and New fails, so a write cannot become public by an oversight.
func (t *routeTable) public(pattern string, h http.Handler, why string) {
	t.addPublic(route{pattern: pattern, access: accessPublic, why: why}, h)
}

// read adds a route that reads users: it needs users.read, or nothing while reads are public.
func (t *routeTable) read(pattern string, h http.Handler) {
	t.addPublic(route{pattern: pattern, access: accessPublic, scope: auth.ScopeRead}, h)
}

// watch adds a read whose answer is a stream that lasts as long as its client watches.
func (t *routeTable) watch(pattern string, h http.Handler) {
	t.addPublic(route{pattern: pattern, access: accessPublic, scope: auth.ScopeRead, stream: true}, h)
}

func (t *routeTable) addPublic(r route, h http.Handler) {
	if r.why == "" && mayWrite(r.pattern) {
		t.err = errors.Join(t.err, fmt.Errorf("route %q may change data and is public without a reason: "+
			"add it with protected, or say why it needs no key", r.pattern))
		return
	}
	t.add(r, h)
}

// protected adds a route that only a request with a valid credential holding scope reaches,
// whether reads are public or not. The credential is checked before h reads anything, so a request
// without one is refused whatever its body.
func (t *routeTable) protected(pattern string, scope auth.Scopes, h http.Handler) {
	t.add(route{pattern: pattern, access: accessProtected, scope: scope}, h)
}

// scim adds a SCIM route: one that needs a scope is protected as every route that reads or changes
// users is, whether reads are public or not, and takes an API key as a bearer, since identity
// providers send no other credential header; one that needs none describes the service, to anyone.
func (t *routeTable) scim(pattern string, scope auth.Scopes, h http.Handler) {
	if scope == 0 {
		t.public(pattern, h, "")
		return
	}
	t.add(route{pattern: pattern, access: accessProtected, scope: scope, keyAsBearer: true}, h)
}

// rpcMethod is a method of an RPC service. reads says why the method changes nothing; it is empty
// for a method that may change data, which then needs a key and users.write. scope is what a
// method that reads needs: users.read for a read of users, none for the service's own methods
// (health, reflection). stream says that the method streams its answer for as long as its client
// watches.
type rpcMethod struct {
	name   string
	reads  string
	scope  auth.Scopes
	stream bool
	// clientStream: the client sends a stream of messages, each up to the body limit, so that
	// the request's body as a whole is bounded by rpcBodyLimit's larger cap.
	clientStream bool
}

// rpc mounts each method of an RPC service at its own path under path, and records path as an
// RPC's, so that the paths whose errors are written in the RPC protocol are exactly the ones
// mounted here. A method that is not mounted is then a miss under an RPC path, answered
// unimplemented in the caller's protocol (connect's handler would answer plain text).
func (t *routeTable) rpc(path string, h http.Handler, methods []rpcMethod) {
	t.rpcPaths = append(t.rpcPaths, path) // first: add asks which routes are RPCs
	for _, m := range methods {
		if m.clientStream {
			if t.clientStreams == nil {
				t.clientStreams = map[string]bool{}
			}
			t.clientStreams[path+m.name] = true
		}
		r := route{pattern: path + m.name, access: accessPublic, why: m.reads, scope: m.scope, stream: m.stream}
		if m.reads == "" {
			r.access = accessProtected
			if r.scope == 0 {
				r.scope = auth.ScopeWrite
			}
			t.add(r, h)
			continue
		}
		t.addPublic(r, h)
	}
}

// add serves h at the route's pattern, behind the check of the route's scope, as a stream if the
// route is one. It records the route in each request it serves (see requestInfo): its pattern
// without the method is the route label of the request's metrics and span.
// patternPath is the path of a mux pattern, without its method.
func patternPath(pattern string) string {
	if i := strings.IndexAny(pattern, " \t"); i >= 0 {
		return strings.TrimLeft(pattern[i:], " \t")
	}
	return pattern
}

func (t *routeTable) add(r route, h http.Handler) {
	if r.access == accessProtected && r.scope == 0 {
		t.err = errors.Join(t.err, fmt.Errorf("route %q is protected but needs no scope: it would answer anyone", r.pattern))
		return
	}
	label := patternPath(r.pattern)
	stats := newRouteStats(label, t.isRPCPath(label))
	if r.stream {
		h = asStream(t.watchHeartbeat, h)
		if t.watchSlots != nil {
			h = limitWatches(t.watchSlots, t.errs, h)
		}
	}
	if r.scope != 0 {
		// Outside the stream's wrappers: a refused watch takes no watch slot.
		h = t.auth.require(r.scope, r.access == accessPublic, r.keyAsBearer, h)
	}
	_, path, _ := strings.Cut(r.pattern, " ")
	served := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if info := infoOf(req.Context()); info != nil {
			info.route = stats
		}
		if t.refusedCustomMethod(w, req, path) {
			return
		}
		h.ServeHTTP(w, req)
	})
	if muxPattern, wildcard, verb, ok := customMethod(r.pattern); ok {
		t.addCustomMethod(r, muxPattern, wildcard, verb, served)
		return
	}
	t.serving.Handle(r.pattern, served)
	t.known.Handle(r.pattern, served)
	t.routes = append(t.routes, r)
}

// isRPCPath reports whether path is under a mounted RPC service's path.
func (t *routeTable) isRPCPath(path string) bool {
	for _, prefix := range t.rpcPaths {
		if strings.HasPrefix(path, prefix) {
			return true
		}
	}
	return false
}

// isRPC reports whether r is addressed to an RPC service: it is under a mounted service's path, or
// it speaks gRPC or gRPC-Web (content types REST never uses), or it says it speaks Connect. Both
// kinds of request may be POSTs of application/json, so the path tells them apart first. It is the
// one answer to "is this an RPC?": the error writer, the security headers and the observer ask it.
func (t *routeTable) isRPC(r *http.Request) bool {
	return strings.HasPrefix(headerValue(r.Header, "Content-Type"), "application/grpc") || headerValue(r.Header, "Connect-Protocol-Version") != "" ||
		t.isRPCPath(r.URL.Path)
}

// mayWrite reports whether a request matched by pattern may change data: its method is not GET or
// HEAD (which also covers GET), or it has no method and so takes every method.
func mayWrite(pattern string) bool {
	i := strings.IndexAny(pattern, " \t") // what ServeMux splits the method off at
	return i < 0 || (pattern[:i] != http.MethodGet && pattern[:i] != http.MethodHead)
}
