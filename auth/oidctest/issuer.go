// Package oidctest runs an OpenID Connect issuer on loopback for tests: a discovery document, a
// key set (JWKS) the test can rotate, and tokens signed with its keys, or forged in the ways an
// attacker would. The signatures are go-jose's.
package oidctest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// Issuer is a running issuer.
type Issuer struct {
	URL string

	mu        sync.Mutex
	signers   map[string]signingKey // by kid
	published map[string]bool       // the kids in the JWKS
	down      bool
	// KeySetFetches counts the fetches of the JWKS.
	KeySetFetches atomic.Int64
}

type signingKey struct {
	private   crypto.Signer
	algorithm jose.SignatureAlgorithm
}

// Start runs an issuer on a loopback port until the test ends. It publishes one key of each
// algorithm, with the kids "rs256", "es256" and "eddsa".
func Start(t testing.TB) *Issuer {
	t.Helper()
	iss := &Issuer{signers: map[string]signingKey{}, published: map[string]bool{}}
	for _, alg := range []jose.SignatureAlgorithm{jose.RS256, jose.ES256, jose.EdDSA} {
		iss.AddKey(t, strings.ToLower(string(alg)), alg, true)
	}
	srv := httptest.NewServer(http.HandlerFunc(iss.serve))
	t.Cleanup(srv.Close)
	iss.URL = srv.URL
	return iss
}

func (iss *Issuer) serve(w http.ResponseWriter, r *http.Request) {
	iss.mu.Lock()
	down := iss.down
	iss.mu.Unlock()
	if down {
		http.Error(w, "the issuer is down", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/.well-known/openid-configuration":
		json.NewEncoder(w).Encode(map[string]any{
			"issuer": iss.URL, "jwks_uri": iss.URL + "/keys",
			"id_token_signing_alg_values_supported": []string{"RS256", "ES256", "EdDSA"},
		})
	case "/keys":
		iss.KeySetFetches.Add(1)
		iss.mu.Lock()
		var set jose.JSONWebKeySet
		for kid, k := range iss.signers {
			if iss.published[kid] {
				set.Keys = append(set.Keys, jose.JSONWebKey{Key: k.private.Public(), KeyID: kid, Algorithm: string(k.algorithm), Use: "sig"})
			}
		}
		iss.mu.Unlock()
		json.NewEncoder(w).Encode(set)
	default:
		http.NotFound(w, r)
	}
}

// AddKey makes a new key of the algorithm under kid, and publishes it in the JWKS if publish.
func (iss *Issuer) AddKey(t testing.TB, kid string, alg jose.SignatureAlgorithm, publish bool) {
	t.Helper()
	var private crypto.Signer
	var err error
	switch alg {
	case jose.RS256:
		private, err = rsa.GenerateKey(rand.Reader, 2048)
	case jose.ES256:
		private, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case jose.EdDSA:
		_, private, err = ed25519.GenerateKey(rand.Reader)
	default:
		t.Fatalf("oidctest: no keys for %s", alg)
	}
	if err != nil {
		t.Fatal(err)
	}
	iss.mu.Lock()
	defer iss.mu.Unlock()
	iss.signers[kid] = signingKey{private: private, algorithm: alg}
	iss.published[kid] = publish
}

// Publish puts the key kid in the JWKS (a rotation), or takes it out.
func (iss *Issuer) Publish(kid string, published bool) {
	iss.mu.Lock()
	defer iss.mu.Unlock()
	iss.published[kid] = published
}

// SetDown makes the issuer answer 503 to everything, or answer again.
func (iss *Issuer) SetDown(down bool) {
	iss.mu.Lock()
	defer iss.mu.Unlock()
	iss.down = down
}

// Claims returns the claims of a token for audience that is valid for an hour: this issuer, the
// subject, and the scopes (space-separated, in "scope").
func (iss *Issuer) Claims(audience, subject, scope string) map[string]any {
	now := time.Now()
	return map[string]any{
		"iss": iss.URL, "aud": audience, "sub": subject, "scope": scope,
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(time.Hour).Unix(),
	}
}

// Sign signs claims with the key kid, naming kid in the token's header.
func (iss *Issuer) Sign(t testing.TB, kid string, claims map[string]any) string {
	t.Helper()
	return sign(t, iss.signer(t, kid, nil), claims)
}

// SignWithHeader signs claims with the key kid, naming kid in the token's protected header
// beside the parameters of extra (such as crit and the extensions it lists).
func (iss *Issuer) SignWithHeader(t testing.TB, kid string, extra map[string]any, claims map[string]any) string {
	t.Helper()
	return sign(t, iss.signer(t, kid, extra), claims)
}

// SignPayload signs payload as it is, with the key kid: a token whose payload may not be claims.
func (iss *Issuer) SignPayload(t testing.TB, kid string, payload []byte) string {
	t.Helper()
	return signBytes(t, iss.signer(t, kid, nil), payload)
}

// signer signs with the key kid, naming kid and the parameters of extra in the protected header.
func (iss *Issuer) signer(t testing.TB, kid string, extra map[string]any) jose.Signer {
	t.Helper()
	iss.mu.Lock()
	k, ok := iss.signers[kid]
	iss.mu.Unlock()
	if !ok {
		t.Fatalf("oidctest: no key %q", kid)
	}
	options := (&jose.SignerOptions{}).WithType("JWT").WithHeader(jose.HeaderKey("kid"), kid)
	for name, value := range extra {
		options = options.WithHeader(jose.HeaderKey(name), value)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: k.algorithm, Key: k.private}, options)
	if err != nil {
		t.Fatal(err)
	}
	return signer
}

// SignWithoutKeyID signs claims with the key kid, leaving kid out of the header.
func (iss *Issuer) SignWithoutKeyID(t testing.TB, kid string, claims map[string]any) string {
	t.Helper()
	iss.mu.Lock()
	k := iss.signers[kid]
	iss.mu.Unlock()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: k.algorithm, Key: k.private}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	return sign(t, signer, claims)
}

// HMACWithPublicKey forges the classic attack on a verifier that trusts a token's alg: an HS256
// token whose secret is the issuer's RSA public key (PEM), which anyone can fetch.
func (iss *Issuer) HMACWithPublicKey(t testing.TB, claims map[string]any) string {
	t.Helper()
	iss.mu.Lock()
	public := iss.signers["rs256"].private.Public()
	iss.mu.Unlock()
	der, err := x509.MarshalPKIXPublicKey(public)
	if err != nil {
		t.Fatal(err)
	}
	secret := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: secret},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader(jose.HeaderKey("kid"), "rs256"))
	if err != nil {
		t.Fatal(err)
	}
	return sign(t, signer, claims)
}

// Unsigned forges a token with "alg": "none" and no signature.
func Unsigned(t testing.TB, claims map[string]any) string {
	t.Helper()
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	return segment([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + segment(payload) + "."
}

// Tampered returns token with its payload replaced by claims, its header and signature kept.
func Tampered(t testing.TB, token string, claims map[string]any) string {
	t.Helper()
	parts := strings.Split(token, ".")
	payload, err := json.Marshal(claims)
	if err != nil || len(parts) != 3 {
		t.Fatalf("oidctest: cannot tamper with %q: %v", token, err)
	}
	return parts[0] + "." + segment(payload) + "." + parts[2]
}

func sign(t testing.TB, signer jose.Signer, claims map[string]any) string {
	t.Helper()
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	return signBytes(t, signer, payload)
}

func signBytes(t testing.TB, signer jose.Signer, payload []byte) string {
	t.Helper()
	signed, err := signer.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	token, err := signed.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return token
}

func segment(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }
