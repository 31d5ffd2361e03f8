// What browsers need: security headers on every answer, and CORS for pages on other origins.
package handlers

import (
	"net/http"
	"slices"
	"strings"

	connectcors "connectrpc.com/cors"
	"github.com/rs/cors"

	"usersd/users"
)

// contentSecurityPolicy allows the page only its own scripts, styles, images and calls: no inline
// script, nothing from another origin, no framing by another site.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

var (
	noSniff                    = []string{"nosniff"}
	contentSecurityPolicyValue = []string{contentSecurityPolicy}
	noReferrer                 = []string{"no-referrer"}
)

// withSecurityHeaders sets the headers that keep a browser from misreading an answer: no MIME
// sniffing (a JSON error cannot be run as a script), the policy above, and no Referer sent on.
// gRPC answers go without them: browsers cannot speak gRPC (they use gRPC-Web or Connect, which get
// the headers), and HPACK-encoding some 300 bytes of headers on every call was a visible share of a
// gRPC call's CPU (docs/PERFORMANCE.md#device-grpc-headers). An answer is a gRPC answer only when a
// gRPC request reaches an RPC path: the content type is the client's to choose, and on any other
// route it must not take the headers away.
func withSecurityHeaders(routes *routeTable, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isGRPC(r) && routes.isRPCPath(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		h := w.Header()
		// Keys in canonical form and values shared by every answer (a header's value slice is
		// replaced, never changed in place), so that no answer pays to canonicalize or allocate them.
		h["X-Content-Type-Options"] = noSniff
		h["Content-Security-Policy"] = contentSecurityPolicyValue
		h["Referrer-Policy"] = noReferrer
		next.ServeHTTP(w, r)
	})
}

// isGRPC reports whether r is a gRPC call (application/grpc or application/grpc+codec), which only
// a program can make, not gRPC-Web, which browsers make.
func isGRPC(r *http.Request) bool {
	contentType := headerValue(r.Header, "Content-Type")
	rest, ok := strings.CutPrefix(contentType, "application/grpc")
	return ok && (rest == "" || rest[0] == '+' || rest[0] == ';')
}

// withCORS lets pages on the given origins call every route, REST and RPC, with the headers the
// service reads and the ones it answers. Without origins it adds nothing: same origin only.
// "*" allows any origin; credentials (cookies) are never involved, since the key is a header.
func withCORS(origins []string, next http.Handler) http.Handler {
	if len(origins) == 0 {
		return next
	}
	return cors.New(cors.Options{
		AllowedOrigins: origins,
		AllowedMethods: append(connectcors.AllowedMethods(), http.MethodPut, http.MethodPatch, http.MethodDelete),
		AllowedHeaders: append(connectcors.AllowedHeaders(),
			APIKeyHeader, "If-Match", "If-None-Match", idempotencyKeyHeader, "X-Request-Id", users.ConsistencyTokenHeader),
		ExposedHeaders: slices.Concat(connectcors.ExposedHeaders(), []string{
			"ETag", "Link", "X-Total-Count", "Location", users.ReplayedHeader, users.ConsistencyTokenHeader, "X-Request-Id", "Www-Authenticate", "Allow",
		}),
		MaxAge: 7200, // seconds a browser may reuse a preflight answer (Chromium's cap)
	}).Handler(next)
}
