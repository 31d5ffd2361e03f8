// The route table: a route is added as public or as protected, never without that choice, and the
// table keeps the list of what was added so that tests can drive every route instead of reading
// the source.
package handlers

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// access is who may call a route. Its zero value is no choice at all; the table never stores it.
type access int

const (
	accessPublic    access = iota + 1 // anyone
	accessProtected                   // only a request with a valid API key
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
}

// routeTable holds every route twice. serving also has a catch-all, so that a request is matched
// once and a miss reaches answerMiss; known has only the routes, and tells answerMiss whether a
// miss is a 404 or a 405 and what Allow holds. (Asking one mux for the handler first and then
// letting it serve matched every request twice.)
//
// Routes are added only by public and protected. protected wraps the handler in the key check
// itself, so there is no separate wrapper to forget, and public refuses a route that may write
// unless it is given a reason.
type routeTable struct {
	serving, known *http.ServeMux
	keys           *APIKeys
	errs           *errorWriter
	metrics        *metrics // counts refused API keys
	routes         []route
	err            error // every refused registration; New fails with it
}

func newRouteTable(keys *APIKeys, errs *errorWriter, metrics *metrics) *routeTable {
	t := &routeTable{serving: http.NewServeMux(), known: http.NewServeMux(), keys: keys, errs: errs, metrics: metrics}
	// The catch-all is not a route of the table: it only answers what no route serves, with an error.
	t.serving.Handle("/", answerMiss(t.known, errs))
	return t
}

// public adds a route that answers anyone. A pattern that may write (see mayWrite) needs why it is
// safe without a key; without one the route is refused and New fails, so a write cannot become
// public by an oversight.
func (t *routeTable) public(pattern string, h http.Handler, why string) {
	if why == "" && mayWrite(pattern) {
		t.err = errors.Join(t.err, fmt.Errorf("route %q may change data and is public without a reason: "+
			"add it with protected, or say why it needs no key", pattern))
		return
	}
	t.add(route{pattern: pattern, access: accessPublic, why: why}, h)
}

// protected adds a route that only a request with a valid API key reaches. The key is checked
// before h reads anything, so a request without one is refused whatever its body.
func (t *routeTable) protected(pattern string, h http.Handler) {
	t.add(route{pattern: pattern, access: accessProtected}, requireAPIKey(t.keys, t.errs, t.metrics, h))
}

// add serves h at the route's pattern, and records the route in each request it serves (see
// requestInfo): its pattern without the method is the route label of the request's metrics and
// span. A route under an RPC service's path serves an RPC.
func (t *routeTable) add(r route, h http.Handler) {
	label := r.pattern
	if i := strings.IndexAny(label, " \t"); i >= 0 {
		label = strings.TrimLeft(label[i:], " \t")
	}
	stats := newRouteStats(label, t.errs.underRPCPath(label))
	served := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if info := infoOf(req.Context()); info != nil {
			info.route = stats
		}
		h.ServeHTTP(w, req)
	})
	t.serving.Handle(r.pattern, served)
	t.known.Handle(r.pattern, served)
	t.routes = append(t.routes, r)
}

// mayWrite reports whether a request matched by pattern may change data: its method is not GET or
// HEAD (which also covers GET), or it has no method and so takes every method.
func mayWrite(pattern string) bool {
	i := strings.IndexAny(pattern, " \t") // what ServeMux splits the method off at
	return i < 0 || (pattern[:i] != http.MethodGet && pattern[:i] != http.MethodHead)
}
