// Custom methods (AIP-136): a route such as "POST /users/{id}:undelete", whose last segment is a
// wildcard followed by a verb. ServeMux matches only whole segments, so the table serves such a
// route at the pattern without the verb and sends a request on only when its segment ends in the
// verb; any other request at that pattern is the miss it was before the route existed.
package handlers

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"connectrpc.com/connect"

	"usersd/handlers/apierror"
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

// customMethodsAt are the custom methods served at one path ("/webhooks/{id}"): each verb with the
// method it takes and its handler. Every pattern at a path names the same wildcard, as ServeMux
// requires of patterns that differ only in their method.
type customMethodsAt struct {
	wildcard string
	verbs    map[string]customMethodRoute
}

// customMethodRoute is one custom method as the table serves it.
type customMethodRoute struct {
	method string
	served http.Handler
}

// verbOf splits the value of a custom method's wildcard ("7:replay") into the value ("7") and
// the verb ("replay"); ok is false when it holds no verb.
func verbOf(value string) (id, verb string, ok bool) {
	colon := strings.LastIndexByte(value, ':')
	if colon < 0 {
		return value, "", false
	}
	return value[:colon], value[colon+1:], true
}

// addCustomMethod serves served, the route's handler with its credential check, for the requests
// at muxPattern whose wildcard ends in ":verb", with the wildcard's value the part before it. One
// handler at muxPattern sends each request on by its verb, so a path may have several custom
// methods (":rotateSecret" and ":replay"). The verb is checked first, so that a request without a
// known one is answered as a miss (405, with the pattern's other methods) whatever its
// credentials. The pattern is served by serving only: known must go on telling answerMiss that
// the method without the verb is not allowed.
func (t *routeTable) addCustomMethod(r route, muxPattern, wildcard, verb string, served http.Handler) {
	method, path, _ := strings.Cut(muxPattern, " ")
	if t.customMethods == nil {
		t.customMethods = map[string]*customMethodsAt{}
	}
	at := t.customMethods[path]
	if at == nil {
		at = &customMethodsAt{wildcard: wildcard, verbs: map[string]customMethodRoute{}}
		t.customMethods[path] = at
		// A method that no route at the path takes ("PUT /webhooks/7:replay") reaches this
		// pattern, which names every method: a custom method's URL is 405 with the method it
		// takes, any other is the miss it would be without it.
		miss := answerMiss(t.known, t.errs)
		t.serving.Handle(path, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if !t.refusedCustomMethod(w, req, path) {
				miss.ServeHTTP(w, req)
			}
		}))
	}
	if at.wildcard != wildcard {
		t.err = errors.Join(t.err, fmt.Errorf("route %q: the custom methods at %q must name one wildcard, {%s}", r.pattern, path, at.wildcard))
		return
	}
	if _, taken := at.verbs[verb]; taken {
		t.err = errors.Join(t.err, fmt.Errorf("route %q: the custom method %q is served twice", r.pattern, verb))
		return
	}
	firstWithMethod := true
	for _, c := range at.verbs {
		firstWithMethod = firstWithMethod && c.method != method
	}
	at.verbs[verb] = customMethodRoute{method: method, served: served}
	t.routes = append(t.routes, r)
	if !firstWithMethod {
		return // the handler at muxPattern finds this verb too
	}
	miss := answerMiss(t.known, t.errs)
	t.serving.Handle(muxPattern, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		value, verb, _ := verbOf(req.PathValue(wildcard))
		c, ok := at.verbs[verb]
		if !ok {
			miss.ServeHTTP(w, req)
			return
		}
		if t.refusedCustomMethod(w, req, path) {
			return // a custom method of another HTTP method
		}
		req.SetPathValue(wildcard, value)
		c.served.ServeHTTP(w, req)
	}))
}

// refusedCustomMethod answers 405 to a request that a route at path matched only because its
// wildcard took a custom method's verb along ("GET /users/7:undelete" matched by "GET
// /users/{id}"): the URL names the custom method, which takes another method. It reports whether
// it answered. The table is complete before any request, so reading customMethods needs no lock.
func (t *routeTable) refusedCustomMethod(w http.ResponseWriter, r *http.Request, path string) bool {
	at, ok := t.customMethods[path]
	if !ok {
		return false
	}
	_, verb, ok := verbOf(r.PathValue(at.wildcard))
	c, known := at.verbs[verb]
	if !ok || !known || c.method == r.Method {
		return false
	}
	w.Header().Set("Allow", c.method)
	t.errs.write(w, r, apierror.New(http.StatusMethodNotAllowed, connect.CodeUnimplemented, apierror.ReasonMethodNotAllowed,
		"method %s is not allowed on %s; allowed: %s", r.Method, r.URL.Path, c.method))
	return true
}
