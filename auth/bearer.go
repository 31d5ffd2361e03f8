// Bearer tokens: JWTs from an OpenID Connect issuer, verified against the keys its discovery
// document names (JWKS). go-jose parses the tokens and checks their signatures; this file decides
// which algorithms, keys and claims are accepted.
package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// BearerConfig says which bearer tokens the service accepts.
type BearerConfig struct {
	// Issuer is the OpenID Connect issuer's URL: its discovery document is at
	// Issuer + "/.well-known/openid-configuration", and a token's iss must be exactly Issuer.
	Issuer string
	// Audience must be one of a token's aud.
	Audience string
	// RefetchEvery is the least time between two fetches of the keys for a token whose kid they
	// lack; 0 means a minute.
	RefetchEvery time.Duration
	// RefreshEvery is how often the keys are fetched anyway, so that a key the issuer withdrew
	// stops being accepted; 0 means 15 minutes.
	RefreshEvery time.Duration
}

// The algorithms a token may be signed with: never "none", never an HMAC (whose key would be the
// issuer's public key, which anyone has).
var bearerAlgorithms = []jose.SignatureAlgorithm{jose.RS256, jose.ES256, jose.EdDSA}

const (
	// BearerLeeway is how far exp and nbf may be off, for clocks that disagree a little.
	BearerLeeway = 30 * time.Second
	// maxBearerBytes bounds a token: a real one is a few kilobytes at most.
	maxBearerBytes = 8 << 10
	// maxActorBytes bounds the subject that becomes a caller's name (OpenID Connect: 255 ASCII).
	maxActorBytes = 255
	// maxKeySetBytes bounds the discovery document and the key set read from the issuer.
	maxKeySetBytes = 1 << 20
	// verifiedCacheBytes bounds the tokens kept verified, by their size.
	verifiedCacheBytes = 16 << 20
)

// bearerVerifier verifies bearer tokens against the issuer's keys, which keepKeys fetches in the
// background from the start, so that the service starts while the issuer is down.
type bearerVerifier struct {
	config BearerConfig
	logger *slog.Logger
	client *http.Client // fetches the discovery document and the keys

	mu          sync.Mutex
	keys        *jose.JSONWebKeySet // nil until the first fetch succeeds
	generation  int                 // grows with each fetch that replaces keys
	lastFetched time.Time
	fetching    *keyFetch // the fetch under way; nil when none is
	verified    map[string]verifiedToken
	cachedBytes int
}

// verifiedToken is what a verified token says, kept until it expires.
type verifiedToken struct {
	subject string
	scopes  Scopes
	expiry  time.Time
}

// Check refuses a configuration that cannot be right: an issuer that is not an https URL (or an
// http one on the loopback interface), or no audience.
func (c BearerConfig) Check() error {
	if err := checkIssuerURL(c.Issuer); err != nil {
		return err
	}
	if c.Audience == "" {
		return errors.New("an audience is required with an issuer: a token for another service of the same issuer must not be accepted")
	}
	return nil
}

// newBearerVerifier returns the verifier of config's tokens, or why config cannot be right. It accepts
// no token until the issuer's keys are fetched: keepKeys fetches them, and must run.
func newBearerVerifier(config BearerConfig, logger *slog.Logger) (*bearerVerifier, error) {
	if err := config.Check(); err != nil {
		return nil, err
	}
	if config.RefetchEvery == 0 {
		config.RefetchEvery = time.Minute
	}
	if config.RefreshEvery == 0 {
		config.RefreshEvery = 15 * time.Minute
	}
	return &bearerVerifier{config: config, logger: logger, client: newIssuerClient(), verified: map[string]verifiedToken{}}, nil
}

// errTokenInvalid is the refusal of a token: its message is the client's, and says no more than
// what is wrong with it.
type errTokenInvalid struct{ why string }

func (e errTokenInvalid) Error() string { return "the bearer token is not valid: " + e.why }

// verify returns what token says, if it is valid now, by the rules of
// docs/ACCESS.md#bearer-tokens-from-an-identity-provider.
func (v *bearerVerifier) verify(ctx context.Context, token string, now time.Time) (verifiedToken, error) {
	if len(token) > maxBearerBytes {
		return verifiedToken{}, errTokenInvalid{fmt.Sprintf("it is over %d bytes", maxBearerBytes)}
	}
	v.mu.Lock()
	cached, hit := v.verified[token]
	keys, generation := v.keys, v.generation
	v.mu.Unlock()
	if hit {
		if now.Add(-BearerLeeway).After(cached.expiry) {
			return verifiedToken{}, errTokenInvalid{"it has expired"}
		}
		return cached, nil
	}
	if keys == nil {
		return verifiedToken{}, errKeysNotLoaded
	}
	parsed, err := jwt.ParseSigned(token, bearerAlgorithms)
	if err != nil {
		return verifiedToken{}, errTokenInvalid{"it is not a JWT signed with RS256, ES256 or EdDSA"}
	}
	header := parsed.Headers[0]
	if _, critical := header.ExtraHeaders[jose.HeaderKey("crit")]; critical {
		// RFC 7515 section 4.1.11: a token whose crit names an extension the recipient does not
		// understand is invalid whoever signed it, and this server understands none. go-jose
		// refuses it too, but as a signature that does not verify, which sends its issuer looking
		// in the wrong place.
		return verifiedToken{}, errTokenInvalid{"it has critical header parameters (crit) that this server does not understand"}
	}
	candidates := keys.Key(header.KeyID)
	if header.KeyID == "" {
		candidates = keys.Keys // an issuer with one key may leave kid out
	} else if len(candidates) == 0 {
		// A kid the keys lack: the issuer may have rotated in a new key. Fetch them again, at most
		// once every RefetchEvery, however many such tokens come.
		if keys, generation = v.refetchForUnknownKey(ctx); keys != nil {
			candidates = keys.Key(header.KeyID)
		}
		if len(candidates) == 0 {
			return verifiedToken{}, errTokenInvalid{"its key (kid) is not one of the issuer's"}
		}
	}
	verifiedBy := false
	for _, k := range candidates {
		if k.Algorithm != "" && k.Algorithm != header.Algorithm {
			continue
		}
		if parsed.Claims(k.Key) == nil { // with nothing to decode into, Claims only verifies
			verifiedBy = true
			break
		}
	}
	if !verifiedBy {
		return verifiedToken{}, errTokenInvalid{"its signature does not verify with the issuer's keys"}
	}
	// The payload is decoded apart from the signature's check, which it passed just above, so that
	// a malformed claim is refused as that, not as a signature that does not verify.
	var payload json.RawMessage
	if err := parsed.UnsafeClaimsWithoutVerification(&payload); err != nil {
		return verifiedToken{}, errTokenInvalid{"its payload is not a JSON object of claims"}
	}
	claims, err := decodeBearerClaims(payload)
	if err != nil {
		return verifiedToken{}, err
	}
	if err := claims.ValidateWithLeeway(jwt.Expected{Issuer: v.config.Issuer, AnyAudience: jwt.Audience{v.config.Audience}, Time: now}, BearerLeeway); err != nil {
		return verifiedToken{}, errTokenInvalid{claimError(err)}
	}
	switch {
	case claims.Expiry == nil:
		return verifiedToken{}, errTokenInvalid{"it has no expiry (exp)"}
	case claims.Subject == "" || len(claims.Subject) > maxActorBytes || !printable(claims.Subject):
		return verifiedToken{}, errTokenInvalid{fmt.Sprintf("its subject (sub) must be 1 to %d printable ASCII characters", maxActorBytes)}
	}
	result := verifiedToken{subject: claims.Subject, scopes: claims.scopes(), expiry: claims.Expiry.Time()}
	v.remember(token, result, generation)
	return result, nil
}

// remember keeps a verified token until the cache is full, when it starts again empty: tokens get
// in only verified, so a flood of bad ones cannot push good ones out. A token verified with keys
// that a fetch has since replaced is not kept: its key may have been withdrawn.
func (v *bearerVerifier) remember(token string, t verifiedToken, generation int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if generation != v.generation {
		return
	}
	if v.cachedBytes+len(token) > verifiedCacheBytes {
		v.verified, v.cachedBytes = map[string]verifiedToken{}, 0
	}
	if _, ok := v.verified[token]; !ok {
		v.verified[token] = t
		v.cachedBytes += len(token)
	}
}

// printable reports whether s is printable ASCII, as OpenID Connect's sub is: a subject goes into
// logs and the change log, where control and direction characters could forge or hide text.
func printable(s string) bool {
	for i := range len(s) {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
