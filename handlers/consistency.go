// The Consistency-Token of REST requests (the README's "Read replicas"): the REST face hands the
// service the token a request sent, and answers a write with the token the service gives it. RPCs
// carry theirs as metadata, which the service reads itself.
package handlers

import (
	"context"
	"net/http"

	"usersd/users"
)

// readContext returns the context of a REST read: it carries the token the request sent, and a
// conditional request reads from the primary, whose answer (304 or not) depends on the newest
// version. A read that says neither keeps its context as it is.
func readContext(r *http.Request) context.Context {
	token := headerValue(r.Header, users.ConsistencyTokenHeader)
	conditional := headerValue(r.Header, "If-None-Match") != "" || headerValue(r.Header, "If-Modified-Since") != ""
	if token == "" && !conditional {
		return r.Context()
	}
	return users.WithConsistency(r.Context(), users.Consistency{Token: token, Primary: conditional})
}

// writeContext returns the context of a REST write, whose token the service sets on w.
func writeContext(w http.ResponseWriter, r *http.Request) context.Context {
	return users.WithConsistency(r.Context(), users.Consistency{
		Token:  headerValue(r.Header, users.ConsistencyTokenHeader),
		Answer: func(token string) { w.Header().Set(users.ConsistencyTokenHeader, token) },
	})
}
