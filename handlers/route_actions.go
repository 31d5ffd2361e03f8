// Custom methods (AIP-136): a route such as "POST /users/{id}:undelete", whose last segment is a
// wildcard followed by a verb. ServeMux matches only whole segments, so the table serves such a
// route at the pattern without the verb and sends a request on only when its segment ends in the
// verb; any other request at that pattern is the miss it was before the route existed.
package handlers

import (
	"fmt"
	"net/http"
	"strings"
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

// addCustomMethod serves served, the route's handler with its credential check, for the requests
// at muxPattern whose wildcard ends in ":verb", with the wildcard's value the part before it. The
// verb is checked first, so that a request without it is answered as a miss (405, with the
// pattern's other methods) whatever its credentials. The pattern is served by serving only: known
// must go on telling answerMiss that the method without the verb is not allowed.
func (t *routeTable) addCustomMethod(r route, muxPattern, wildcard, verb string, served http.Handler) {
	if t.customMethods == nil {
		t.customMethods = map[string]bool{}
	}
	if t.customMethods[muxPattern] {
		t.err = fmt.Errorf("route %q: a second custom method at %q is not supported", r.pattern, muxPattern)
		return
	}
	t.customMethods[muxPattern] = true
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
