// Package auth holds the credentials of usersd: API keys, scopes, bearer tokens with their issuer's
// keys, and rate limits. Its Gate answers three questions about a request: who is this, what may
// they do, and may they go now. It knows no route and no HTTP status: each face (REST and the RPC
// protocols in package handlers) reads the credentials from its own headers, asks the Gate, and
// turns the Decision into its own answer.
package auth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// GateConfig is what a Gate is made from.
type GateConfig struct {
	// Keys are the valid API keys, with their scopes; at least one.
	Keys *APIKeys
	// PrivateReads makes reads need a credential too (-public-reads=false).
	PrivateReads bool
	// RateLimit is the requests a second each caller may make; 0 means no limit. RateBurst is the
	// most it may make at once; 0 means twice RateLimit (at least 1).
	RateLimit float64
	RateBurst int
	// Bearer, when set, accepts bearer tokens from an OpenID Connect issuer besides API keys.
	Bearer *BearerConfig
	// Logger takes what goes wrong while fetching the issuer's keys.
	Logger *slog.Logger
}

// Gate decides whether a request may go on, and as whom.
type Gate struct {
	keys         *APIKeys
	privateReads bool
	limiter      *Limiter        // nil limits nothing
	bearer       *bearerVerifier // nil refuses bearer tokens
}

// NewGate returns the gate of config, or why config cannot be right. With an issuer, KeepKeys must
// run for bearer tokens to be accepted.
func NewGate(config GateConfig) (*Gate, error) {
	if config.Keys == nil || config.Keys.Len() == 0 {
		return nil, errors.New("at least one API key is needed: there is never an unauthenticated write path")
	}
	g := &Gate{keys: config.Keys, privateReads: config.PrivateReads,
		limiter: newLimiter(config.RateLimit, config.RateBurst, maxRateCallers)}
	if config.Bearer != nil {
		bearer, err := newBearerVerifier(*config.Bearer, config.Logger)
		if err != nil {
			return nil, fmt.Errorf("bearer tokens: %w", err)
		}
		g.bearer = bearer
	}
	return g, nil
}

// KeepKeys fetches the token issuer's keys, and again now and then, until ctx ends; without an
// issuer it returns at once.
func (g *Gate) KeepKeys(ctx context.Context) {
	if g.bearer != nil {
		g.bearer.keepKeys(ctx)
	}
}

// Limiter is the gate's rate limiter, whose policy and state a face writes on its answers; nil
// when nothing is limited.
func (g *Gate) Limiter() *Limiter { return g.limiter }

// Request is what the gate looks at: the credentials a request carries and what it asks for.
type Request struct {
	// APIKey is the key the request sent (x-api-key); Authorization, its Authorization header.
	APIKey, Authorization string
	// TokenInURL says that the request's URL carries an access token, which is refused wherever
	// it comes.
	TokenInURL bool
	// KeyAsBearer lets Authorization: Bearer carry an API key as well as a token: SCIM's routes
	// take it, since identity providers can send no other header.
	KeyAsBearer bool
	// RemoteAddr is the client's address (host:port): the caller of a request without a valid
	// credential, for the rate limits.
	RemoteAddr string
	// Need is the scope the route needs; PublicRead says that the route is a read, which callers
	// without credentials may make while reads are public.
	Need       Scopes
	PublicRead bool
	// Now is when the request began: its credential is checked and its tokens taken at it.
	Now time.Time
}

// Verdict is what the gate decided.
type Verdict uint8

const (
	// Pass lets the request go on: as Decision.Identity, or as anyone when that is zero.
	Pass Verdict = iota
	// NoCredential refuses a request that needs a credential and sent none.
	NoCredential
	// BadCredential refuses a credential that is not valid, or sent in a way that is refused.
	BadCredential
	// MissingScope refuses a valid credential that does not hold the scope needed.
	MissingScope
	// OverRate refuses a caller over its rate; Decision.Rate says until when.
	OverRate
	// Unavailable means the gate cannot tell yet: the token issuer's keys are not loaded.
	Unavailable
)

// Identity is who a valid credential says the caller is, and what it may do.
type Identity struct {
	// ID names the caller in stored records (the owner of an idempotency key): an API key's hex
	// SHA-256 digest, or "sub:" and a token's subject. Never a secret.
	ID string
	// Name is who the caller is to people: the key's name or the token's subject.
	Name string
	// Expires is when the credential stops being valid; zero for an API key.
	Expires time.Time
	Scopes  Scopes
	// Bearer says that the credential is a bearer token.
	Bearer bool
	// bucket is the caller's rate limit bucket: a key's name (every key of one name shares it), or
	// a token's subject.
	bucket string
}

// Decision is what the gate answers.
type Decision struct {
	Verdict Verdict
	// Identity is the caller of a request that passes with a valid credential; zero for one that
	// passes as anyone.
	Identity Identity
	// Err says why a request is refused, in words for the client; nil when it passes.
	Err error
	// Challenge is the WWW-Authenticate value of a refusal of a bearer token (RFC 6750); "" for
	// other refusals.
	Challenge string
	// KeyRefused is why an API key was refused, "missing" or "invalid", as usersd's metrics count
	// it; "" when no key was.
	KeyRefused string
	// RefusedCaller names the holder of a valid credential that is refused all the same (for a
	// scope it does not hold, or its rate spent), for the access log; "" otherwise. A name, never
	// a secret.
	RefusedCaller string
	// Limited says that the limiter decided Rate: a face writes its policy and state on the answer.
	Limited bool
	Rate    RateDecision
}

var (
	errUnauthenticated    = errors.New("a valid API key is required in the x-api-key header")
	errTwoCredentials     = errors.New("send one credential, an API key (x-api-key) or a bearer token (Authorization), not both")
	errNotBearer          = errors.New("the Authorization header takes a bearer token: Authorization: Bearer <token>")
	errNoIssuer           = errors.New("this service takes no bearer tokens (no -jwt-issuer): send an API key in x-api-key")
	errNoBearerCredential = errors.New("a credential is required: Authorization: Bearer <an API key or a token>")
	errBearerNotKey       = errors.New("the bearer is not a valid API key, and this service takes no bearer tokens (no -jwt-issuer)")
	errTokenInURL         = errors.New("a token in the URL is refused (URLs end up in logs and histories): send it in the Authorization header")
)

// Decide lets a request through only with a credential that holds r.Need or, for a public read
// while reads are public, with any credential or none: a public read is served to anyone, and a
// credential that is valid and holds the scope only names its caller. Before any of that, the
// request takes a token from its caller's bucket: the caller of a request without a valid
// credential is its client address, so that guessing keys is limited too.
func (g *Gate) Decide(ctx context.Context, r Request) Decision {
	if r.TokenInURL {
		return Decision{Verdict: BadCredential, Err: errTokenInURL, Challenge: `Bearer error="invalid_request"`}
	}
	presented := r.APIKey != "" || r.Authorization != ""
	var address string
	if g.limiter != nil {
		address = addressBucket(r.RemoteAddr)
		// An address whose wrong credentials have spent its failures' bucket has no credential
		// looked at, right or wrong, until the bucket refills: the answer must not tell a guesser
		// which guess was right.
		if presented {
			if rate := g.limiter.peek(failuresBucket(address), r.Now); !rate.Allowed {
				return g.overRate(rate)
			}
		}
	}
	id, err := g.identify(ctx, r.APIKey, r.Authorization, r.KeyAsBearer, r.Now)
	valid := presented && err == nil
	unavailable := errors.Is(err, errKeysNotLoaded) // no fault of the credential's
	var d Decision
	if g.limiter != nil {
		if presented && !valid && !unavailable {
			g.limiter.take(failuresBucket(address), r.Now)
		}
		bucket := address
		if valid {
			bucket = id.bucket
		}
		if d.Rate = g.limiter.take(bucket, r.Now); !d.Rate.Allowed {
			refused := g.overRate(d.Rate)
			if valid {
				refused.RefusedCaller = id.Name
			}
			return refused
		}
		d.Limited = true
	}
	switch {
	case valid && id.Scopes.Has(r.Need):
		d.Identity = id
	case r.PublicRead && !g.privateReads:
		// served as to anyone
	case !presented && r.KeyAsBearer:
		d.Verdict, d.Err, d.KeyRefused = NoCredential, errNoBearerCredential, "missing"
	case !presented:
		d.Verdict, d.Err, d.KeyRefused = NoCredential, errUnauthenticated, "missing"
	case unavailable:
		d.Verdict, d.Err = Unavailable, err
	case err != nil:
		d.Verdict, d.Err = BadCredential, err
		if id.Bearer {
			d.Challenge = `Bearer error="invalid_token"`
		} else {
			d.KeyRefused = "invalid"
		}
	default:
		d.Verdict, d.RefusedCaller = MissingScope, id.Name
		what := "API key named " + id.Name
		if id.Bearer {
			what = "bearer token of " + id.Name
			d.Challenge = `Bearer error="insufficient_scope", scope="` + r.Need.String() + `"`
		}
		d.Err = fmt.Errorf("the %s does not hold the %s scope that this needs", what, r.Need)
	}
	return d
}

// overRate is the refusal of a caller whose bucket is empty.
func (g *Gate) overRate(rate RateDecision) Decision {
	return Decision{Verdict: OverRate, Limited: true, Rate: rate,
		Err: fmt.Errorf("too many requests: each caller may make %g a second, in bursts of %d; retry in %d s",
			float64(g.limiter.limit), g.limiter.burst, rate.RetryAfter())}
}

// identify checks the credential a request carries: apiKey (x-api-key) or authorization (its
// Authorization header), whose bearer may be an API key where keyAsBearer says so. With neither,
// it returns no identity and no error; err says why one is refused, and the identity of a refused
// bearer token says Bearer.
func (g *Gate) identify(ctx context.Context, apiKey, authorization string, keyAsBearer bool, now time.Time) (Identity, error) {
	switch {
	case apiKey != "" && authorization != "":
		return Identity{}, errTwoCredentials
	case apiKey != "":
		key, digest, ok := g.keys.find(apiKey)
		if !ok {
			return Identity{}, errUnauthenticated
		}
		return Identity{ID: digest, Name: key.Name, Scopes: key.Scopes, bucket: "key " + key.Name}, nil
	case authorization == "":
		return Identity{}, nil
	}
	scheme, token, _ := strings.Cut(authorization, " ")
	if !strings.EqualFold(scheme, "Bearer") || token == "" {
		return Identity{Bearer: true}, errNotBearer
	}
	if keyAsBearer {
		if key, digest, ok := g.keys.find(strings.TrimSpace(token)); ok {
			return Identity{ID: digest, Name: key.Name, Scopes: key.Scopes, bucket: "key " + key.Name}, nil
		}
		if g.bearer == nil {
			return Identity{Bearer: true}, errBearerNotKey
		}
	}
	if g.bearer == nil {
		return Identity{Bearer: true}, errNoIssuer
	}
	t, err := g.bearer.verify(ctx, strings.TrimSpace(token), now)
	if err != nil {
		return Identity{Bearer: true}, err
	}
	return Identity{ID: "sub:" + t.subject, Name: t.subject, Expires: t.expiry.Add(BearerLeeway), Scopes: t.scopes,
		Bearer: true, bucket: "sub " + t.subject}, nil
}

// failuresBucket is the bucket that an address's wrong credentials take from.
func failuresBucket(address string) string { return "failures of " + address }
