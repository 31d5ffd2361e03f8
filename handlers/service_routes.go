// The service's own routes beside the users resource: health, request introspection, echo, a
// protected example, and a route that always fails (to prove the final error handler).
package handlers

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"
	"usersd/handlers/health"
	"usersd/handlers/restbody"
	"usersd/internal/plainjson"
	"usersd/users"
)

// healthREST answers exactly {"ok":true} while the store answers, and 503 {"ok":false} otherwise.
func healthREST(checker *health.Checker) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeHealth(w, checker.Serving(r.Context()))
	})
}

// writeHealth writes /health's answer: {"ok":true}, or 503 {"ok":false}; never cached.
func writeHealth(w http.ResponseWriter, ok bool) {
	w.Header().Set("Cache-Control", "no-store")
	if !ok {
		writeJSONBytes(w, http.StatusServiceUnavailable, []byte(`{"ok":false}`))
		return
	}
	writeJSONBytes(w, http.StatusOK, []byte(`{"ok":true}`))
}

// livezREST answers 200 {"ok":true} while the process serves HTTP, whatever its database does: a
// liveness probe on it restarts a process that is stuck, not one whose database is down.
func livezREST() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		writeJSONBytes(w, http.StatusOK, []byte(`{"ok":true}`))
	})
}

// readyzREST answers 200 {"ok":true} while the process should be sent requests (the store answers
// and takes writes, and the server is not draining), and 503 {"error": why} otherwise: what a
// readiness probe or a load balancer asks.
func readyzREST(checker *health.Checker) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		if why := checker.NotReady(r.Context()); why != "" {
			w.Header().Set("Retry-After", "1")
			writeUnavailableJSON(w, why)
			return
		}
		writeJSONBytes(w, http.StatusOK, []byte(`{"ok":true}`))
	})
}

// credentialWords are parts of the names of headers that carry credentials, the standard ones
// (Authorization, Cookie) and the many that services make up (X-Auth-Token, Api-Key, X-Pass,
// X-Amz-Security-Token, X-Goog-Api-Key, X-CSRF-Token, X-Session-Id, X-Hub-Signature, X-Sig, ...):
// /info shows that such a header is there, never its value. The words are short on purpose
// ("pass" for password and passphrase, "sig" for signature) so that a made-up name is caught too;
// a harmless header that matches (Idempotency-Key) is only shown redacted.
var credentialWords = []string{"key", "token", "secret", "pass", "sig", "auth", "cookie", "session", "csrf", "xsrf",
	"credential", "jwt", "bearer"}

// isCredentialHeader reports whether a header, by its lower-case name, may carry a credential.
func isCredentialHeader(name string) bool {
	return slices.ContainsFunc(credentialWords, func(word string) bool { return strings.Contains(name, word) })
}

// infoREST describes the request as the server received it.
func infoREST(errs *errorWriter) http.Handler {
	return errs.rest(func(w http.ResponseWriter, r *http.Request) error {
		headers := map[string]string{"host": r.Host} // Go keeps Host apart from the other headers
		for name, values := range r.Header {
			name = strings.ToLower(name)
			if isCredentialHeader(name) {
				headers[name] = "[redacted]"
			} else {
				headers[name] = strings.Join(values, ", ")
			}
		}
		return writeJSON(w, http.StatusOK, map[string]any{"method": r.Method, "path": r.URL.Path, "headers": headers})
	})
}

// echoREST answers with the JSON it was sent; it changes nothing, so it needs no key.
func echoREST(errs *errorWriter) http.Handler {
	return errs.rest(func(w http.ResponseWriter, r *http.Request) error {
		body, err := readBody(r, restbody.MediaTypeJSON)
		if err != nil {
			return err
		}
		if !json.Valid(body) || !utf8.Valid(body) { // json.Valid lets invalid UTF-8 through (RFC 8259 §8.1)
			return users.InvalidField("body", "the body is not valid JSON in UTF-8")
		}
		return writeJSON(w, http.StatusOK, map[string]json.RawMessage{"youSent": body})
	})
}

// privateREST is reached only with a valid credential that holds users.read (see routes.go).
func privateREST(errs *errorWriter) http.Handler {
	return errs.rest(func(w http.ResponseWriter, r *http.Request) error {
		return writeJSON(w, http.StatusOK, map[string]int{"secretData": 42})
	})
}

// boomREST always fails, to show that a fault is logged and answered with the fixed 500 body.
func boomREST() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		panic("boom: this route fails on purpose")
	})
}

// writeJSON answers with v encoded by encoding/json, for bodies that are not proto messages.
func writeJSON(w http.ResponseWriter, status int, v any) error {
	body, err := plainjson.Marshal(v)
	if err != nil {
		return err
	}
	writeJSONBytes(w, status, body)
	return nil
}
