// Who may do what, on HTTP: the check in front of every route that reads or changes users, on REST
// and RPC alike. It reads the credentials from the request's headers, asks the auth.Gate, and
// turns its decision into headers and a status; the decision itself is package auth's.
package handlers

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"connectrpc.com/connect"

	"usersd/auth"
	"usersd/handlers/apierror"
	"usersd/users"
)

// APIKeyHeader carries the caller's key (gRPC metadata of the same name).
const APIKeyHeader = "x-api-key"

// apiKeyHeaderKey is APIKeyHeader as net/http keys a header map: looking it up in this form costs
// no canonicalisation (and no allocation) on every request.
var apiKeyHeaderKey = http.CanonicalHeaderKey(APIKeyHeader)

// refusalReason is a refusal's reason as usersd_refused_requests_total labels it.
func refusalReason(v auth.Verdict) string {
	switch v {
	case auth.NoCredential:
		return "no_credential"
	case auth.BadCredential:
		return "bad_credential"
	case auth.MissingScope:
		return "scope"
	case auth.OverRate:
		return "rate"
	}
	return "other"
}

// authorizer checks the credentials of the requests of the routes that need a scope.
type authorizer struct {
	gate    *auth.Gate
	errs    *errorWriter
	metrics *metrics // counts refused requests; nil counts nothing
}

// require lets a request through to next only when the gate lets it pass (see auth.Gate.Decide),
// with the caller the gate names in its context. The check runs before the handler reads
// anything, so a refused request costs no work and is refused whatever its body.
func (a *authorizer) require(need auth.Scopes, publicRead, keyAsBearer bool, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info := infoOf(r.Context())
		d := a.gate.Decide(r.Context(), auth.Request{
			APIKey:        headerValue(r.Header, apiKeyHeaderKey),
			Authorization: headerValue(r.Header, "Authorization"),
			TokenInURL:    tokenInQuery(r.URL.RawQuery),
			KeyAsBearer:   keyAsBearer,
			RemoteAddr:    r.RemoteAddr,
			Need:          need,
			PublicRead:    publicRead,
			Now:           startOf(info), // milliseconds ago at most, and one clock read fewer
		})
		if d.Limited {
			setRateHeaders(w.Header(), a.gate.Limiter(), d.Rate)
		}
		if d.Challenge != "" {
			w.Header().Set("WWW-Authenticate", d.Challenge)
		}
		switch d.Verdict {
		case auth.Pass:
		case auth.Unavailable: // not a refusal: the service cannot tell yet
			a.errs.write(w, r, users.NewError(connect.CodeUnavailable, users.ReasonNone, "%s", d.Err))
			return
		default:
			if info != nil {
				info.caller = d.RefusedCaller // the access line says whom it refused, as it says whom it served
			}
			a.refuse(w, r, d)
			return
		}
		if d.Identity.ID == "" {
			next.ServeHTTP(w, r) // served as to anyone
			return
		}
		if info != nil {
			info.caller = d.Identity.Name
		}
		caller := users.Caller{ID: d.Identity.ID, Name: d.Identity.Name, Token: d.Identity.Bearer, Expires: d.Identity.Expires}
		next.ServeHTTP(w, r.WithContext(users.WithCaller(r.Context(), caller)))
	})
}

// refuse answers a refusal with its status and code, and counts it by reason; a refused API key is
// also counted as the key's (usersd_refused_keys_total, which predates scopes).
func (a *authorizer) refuse(w http.ResponseWriter, r *http.Request, d auth.Decision) {
	a.metrics.refusedRequest(refusalReason(d.Verdict))
	if d.KeyRefused != "" {
		a.metrics.refusedKey("api_key", d.KeyRefused)
	}
	var err error
	switch d.Verdict {
	case auth.MissingScope:
		err = users.NewError(connect.CodePermissionDenied, users.ReasonNone, "%s", d.Err)
	case auth.OverRate:
		err = apierror.New(http.StatusTooManyRequests, connect.CodeResourceExhausted, apierror.ReasonRateLimited, "%s", d.Err)
	default:
		err = users.NewError(connect.CodeUnauthenticated, users.ReasonNone, "%s", d.Err)
	}
	a.errs.write(w, r, err)
}

// setRateHeaders writes the IETF draft's RateLimit-Policy and RateLimit on an answer, and
// Retry-After on a refusal for the rate.
func setRateHeaders(h http.Header, limiter *auth.Limiter, d auth.RateDecision) {
	h.Set("RateLimit-Policy", limiter.Policy())
	h.Set("RateLimit", limiter.State(d))
	if !d.Allowed {
		h.Set("Retry-After", strconv.Itoa(d.RetryAfter()))
	}
}

// tokenInQuery reports whether a query string carries access_token, however it is escaped; the
// query is parsed only if it could.
func tokenInQuery(rawQuery string) bool {
	if !strings.Contains(rawQuery, "access_token") && !strings.Contains(rawQuery, "%") {
		return false
	}
	query, _ := url.ParseQuery(rawQuery)
	return query.Has("access_token")
}
