// Who may do what: the one check in front of every route that reads or changes users, on REST and
// RPC alike. A route needs a scope (users.read or users.write) or none (the service's own routes);
// a read may go without a credential while reads are public.
package handlers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"connectrpc.com/connect"

	"usersd/users"
)

// authorizer checks the credentials of the requests of the routes that need a scope.
type authorizer struct {
	keys *APIKeys
	// privateReads makes reads need a credential too (-public-reads=false).
	privateReads bool
	errs         *errorWriter
	metrics      *metrics // counts refused requests; nil counts nothing
	// limiter limits each caller's requests; nil limits nothing.
	limiter *rateLimiter
	// bearer verifies bearer tokens; nil refuses them.
	bearer *bearerVerifier
}

// refusal reasons, as usersd_refused_requests_total labels them.
const (
	refusedNoCredential  = "no_credential"
	refusedBadCredential = "bad_credential"
	refusedScope         = "scope"
	refusedRate          = "rate"
)

var errUnauthenticated = connect.NewError(connect.CodeUnauthenticated,
	errors.New("a valid API key is required in the x-api-key header"))

// identity is who a valid credential says the caller is, and what it may do.
type identity struct {
	caller users.Caller
	scopes Scopes
	// bucket is the caller's rate limit bucket: a key's name (every key of one name shares it), or
	// a token's subject.
	bucket string
	// bearer says that the credential was a bearer token: its refusals carry WWW-Authenticate.
	bearer bool
}

// identify checks the credential a request carries: secret, its API key (x-api-key), or
// authorization, its Authorization header. presented is false when there is none; err says why
// one is refused.
func (a *authorizer) identify(ctx context.Context, secret, authorization string, now time.Time) (id identity, presented bool, err error) {
	switch {
	case secret != "" && authorization != "":
		return identity{}, true, errTwoCredentials
	case secret != "":
		key, digest, ok := a.keys.find(secret)
		if !ok {
			return identity{}, true, errUnauthenticated
		}
		return identity{caller: users.Caller{ID: digest, Name: key.Name}, scopes: key.Scopes, bucket: "key " + key.Name}, true, nil
	case authorization == "":
		return identity{}, false, nil
	}
	scheme, token, _ := strings.Cut(authorization, " ")
	if !strings.EqualFold(scheme, "Bearer") || token == "" {
		return identity{bearer: true}, true, errNotBearer
	}
	if a.bearer == nil {
		return identity{bearer: true}, true, errNoIssuer
	}
	t, err := a.bearer.verify(ctx, strings.TrimSpace(token), now)
	if errors.Is(err, errKeysNotLoaded) {
		return identity{bearer: true}, true, err
	}
	if err != nil {
		return identity{bearer: true}, true, connect.NewError(connect.CodeUnauthenticated, err)
	}
	return identity{caller: users.Caller{ID: "sub:" + t.subject, Name: t.subject, Expires: t.expiry.Add(bearerLeeway)}, scopes: t.scopes,
		bucket: "sub " + t.subject, bearer: true}, true, nil
}

var (
	errTwoCredentials = connect.NewError(connect.CodeUnauthenticated,
		errors.New("send one credential, an API key (x-api-key) or a bearer token (Authorization), not both"))
	errNotBearer = connect.NewError(connect.CodeUnauthenticated,
		errors.New("the Authorization header takes a bearer token: Authorization: Bearer <token>"))
	errNoIssuer = connect.NewError(connect.CodeUnauthenticated,
		errors.New("this service takes no bearer tokens (no -jwt-issuer): send an API key in x-api-key"))
	errTokenInURL = connect.NewError(connect.CodeUnauthenticated,
		errors.New("a token in the URL is refused (URLs end up in logs and histories): send it in the Authorization header"))
)

// require lets a request through to next only with a credential that holds need or, when
// anonymous (a public route's read) and reads are public, with any credential or none: a public
// read is served to anyone, as before scopes, and a credential that is valid and holds the scope
// only names its caller. Before any of that, the request takes a token from its caller's bucket
// (see rateLimiter): the caller of a request without a valid credential is its client address, so
// that guessing keys is limited too. The check runs before the handler reads anything, so a
// refused request costs no work and is refused whatever its body.
func (a *authorizer) require(need Scopes, anonymous bool, next http.Handler) http.Handler {
	publicRead := anonymous && !a.privateReads
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tokenInQuery(r.URL.RawQuery) {
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_request"`)
			a.refuse(w, r, refusedBadCredential, "", errTokenInURL)
			return
		}
		secret, authorization := headerValue(r.Header, apiKeyHeaderKey), headerValue(r.Header, "Authorization")
		now := startOf(infoOf(r.Context())) // milliseconds ago at most, and one clock read fewer
		var address string
		if a.limiter != nil {
			address = anonymousCaller(r)
			// An address whose wrong credentials have spent its failures' bucket has no credential
			// looked at, right or wrong, until the bucket refills: the answer must not tell a
			// guesser which guess was right.
			if secret != "" || authorization != "" {
				if decision := a.limiter.peek(failuresBucket(address), now); !decision.allowed {
					a.refuseRate(w, r, decision)
					return
				}
			}
		}
		id, presented, err := a.identify(r.Context(), secret, authorization, now)
		valid := presented && err == nil
		unavailable := errors.Is(err, errKeysNotLoaded) // no fault of the credential's
		if a.limiter != nil {
			if presented && !valid && !unavailable {
				a.limiter.take(failuresBucket(address), now)
			}
			bucket := address
			if valid {
				bucket = id.bucket
			}
			decision := a.limiter.take(bucket, now)
			if !decision.allowed {
				a.refuseRate(w, r, decision)
				return
			}
			a.limiter.setHeaders(w.Header(), decision)
		}
		switch {
		case valid && id.scopes.Has(need):
		case publicRead:
			next.ServeHTTP(w, r) // served as to anyone
			return
		case !presented:
			a.refuse(w, r, refusedNoCredential, "missing", errUnauthenticated)
			return
		case unavailable:
			a.errs.write(w, r, connect.NewError(connect.CodeUnavailable, err)) // not a refusal: the service cannot tell yet
			return
		case err != nil:
			keyReason := "invalid"
			if id.bearer {
				keyReason = ""
				w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			}
			a.refuse(w, r, refusedBadCredential, keyReason, err)
			return
		default:
			what := "API key named " + id.caller.Name
			if id.bearer {
				what = "bearer token of " + id.caller.Name
				w.Header().Set("WWW-Authenticate", `Bearer error="insufficient_scope", scope="`+need.String()+`"`)
			}
			a.refuse(w, r, refusedScope, "", connect.NewError(connect.CodePermissionDenied,
				fmt.Errorf("the %s does not hold the %s scope that this needs", what, need)))
			return
		}
		if info := infoOf(r.Context()); info != nil {
			info.caller = id.caller.Name
		}
		next.ServeHTTP(w, r.WithContext(users.WithCaller(r.Context(), id.caller)))
	})
}

// refuseRate answers a request over its caller's rate.
func (a *authorizer) refuseRate(w http.ResponseWriter, r *http.Request, decision rateDecision) {
	a.limiter.setHeaders(w.Header(), decision)
	a.refuse(w, r, refusedRate, "", newHTTPError(http.StatusTooManyRequests, connect.CodeResourceExhausted,
		"too many requests: each caller may make %g a second, in bursts of %d; retry in %d s",
		float64(a.limiter.limit), a.limiter.burst, ceilSeconds(decision.retry)))
}

// failuresBucket is the bucket that an address's wrong credentials take from.
func failuresBucket(address string) string { return "failures of " + address }

// tokenInQuery reports whether a query string carries access_token, however it is escaped; the
// query is parsed only if it could.
func tokenInQuery(rawQuery string) bool {
	if !strings.Contains(rawQuery, "access_token") && !strings.Contains(rawQuery, "%") {
		return false
	}
	query, _ := url.ParseQuery(rawQuery)
	return query.Has("access_token")
}

// refuse answers err and counts the refusal by reason; keyReason, if any, is also counted as the
// API key's (usersd_refused_keys_total, which predates scopes).
func (a *authorizer) refuse(w http.ResponseWriter, r *http.Request, reason, keyReason string, err error) {
	a.metrics.refusedRequest(reason)
	if keyReason != "" {
		a.metrics.refusedKey("api_key", keyReason)
	}
	a.errs.write(w, r, err)
}
