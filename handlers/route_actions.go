// Custom methods (AIP-136): a route such as "POST /users/{id}:undelete", whose last segment is a
// wildcard followed by a verb. ServeMux matches only whole segments, so the table serves such a
// route at the pattern without the verb and sends a request on only when its segment ends in the
// verb; any other request at that pattern is the miss it was before the route existed.
package handlers

import (
	"fmt"
	"net/http"
	"strings"

	"connectrpc.com/connect"
)

// customMethod splits a pattern whose last segment is "{name}:verb" into the pattern ServeMux
// matches ("… /{name}"), the wildcard's name and the verb; ok is false for every other pattern.
func customMethod(pattern string) (muxPattern, wildcard, verb string, ok bool) {
	slash := strings.LastIndexByte(pattern, '/')
	if slash < 0 {
		return "", "", "", false
	}
	segment := pattern[slash+1:]
	if !strings.HasPrefix(segment, "{") {
		return "", "", "", false
	}
	name, verb, found := strings.Cut(segment[1:], "}:")
	if !found || name == "" || verb == "" || strings.ContainsAny(verb, "{}/") {
		return "", "", "", false
	}
	return pattern[:slash+1] + "{" + name + "}", name, verb, true
}

// customMethodRoute is a custom method as the table serves it: the method it takes, the wildcard
// its verb follows, and the verb.
type customMethodRoute struct{ method, wildcard, verb string }

// addCustomMethod serves served, the route's handler with its credential check, for the requests
// at muxPattern whose wildcard ends in ":verb", with the wildcard's value the part before it. The
// verb is checked first, so that a request without it is answered as a miss (405, with the
// pattern's other methods) whatever its credentials. The pattern is served by serving only: known
// must go on telling answerMiss that the method without the verb is not allowed.
func (t *routeTable) addCustomMethod(r route, muxPattern, wildcard, verb string, served http.Handler) {
	method, path, _ := strings.Cut(muxPattern, " ")
	if t.customMethods == nil {
		t.customMethods = map[string]customMethodRoute{}
	}
	if _, taken := t.customMethods[path]; taken {
		t.err = fmt.Errorf("route %q: a second custom method at %q is not supported", r.pattern, path)
		return
	}
	t.customMethods[path] = customMethodRoute{method: method, wildcard: wildcard, verb: verb}
	miss := answerMiss(t.known, t.errs)
	t.serving.Handle(muxPattern, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		value, found := strings.CutSuffix(req.PathValue(wildcard), ":"+verb)
		if !found {
			miss.ServeHTTP(w, req)
			return
		}
		req.SetPathValue(wildcard, value)
		served.ServeHTTP(w, req)
	}))
	t.routes = append(t.routes, r)
}

// refusedCustomMethod answers 405 to a request that a route at path matched only because its
// wildcard took a custom method's verb along ("GET /users/7:undelete" matched by "GET
// /users/{id}"): the URL names the custom method, which takes another method. It reports whether
// it answered. The table is complete before any request, so reading customMethods needs no lock.
func (t *routeTable) refusedCustomMethod(w http.ResponseWriter, r *http.Request, path string) bool {
	c, ok := t.customMethods[path]
	if !ok || !strings.HasSuffix(r.PathValue(c.wildcard), ":"+c.verb) {
		return false
	}
	w.Header().Set("Allow", c.method)
	t.errs.write(w, r, newHTTPError(http.StatusMethodNotAllowed, connect.CodeUnimplemented, reasonMethodNotAllowed,
		"method %s is not allowed on %s; allowed: %s", r.Method, r.URL.Path, c.method))
	return true
}
