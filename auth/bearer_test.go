package auth

import (
	"log/slog"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"usersd/auth/oidctest"
)

// BenchmarkBearerVerifyUnseen is the verification of a token the service has not seen: parsing,
// the signature and the claims, by algorithm (the cache is emptied before each).
func BenchmarkBearerVerifyUnseen(b *testing.B) {
	iss := oidctest.Start(b)
	v, err := newBearerVerifier(BearerConfig{Issuer: iss.URL, Audience: "usersd-test"}, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	go v.keepKeys(b.Context())
	for !v.loaded() {
		time.Sleep(10 * time.Millisecond)
	}
	for _, alg := range []jose.SignatureAlgorithm{jose.RS256, jose.ES256, jose.EdDSA} {
		token := iss.Sign(b, map[jose.SignatureAlgorithm]string{jose.RS256: "rs256", jose.ES256: "es256", jose.EdDSA: "eddsa"}[alg],
			iss.Claims("usersd-test", "bench-robot", "users.write"))
		b.Run("alg="+string(alg), func(b *testing.B) {
			for b.Loop() {
				v.mu.Lock()
				v.verified, v.cachedBytes = map[string]verifiedToken{}, 0
				v.mu.Unlock()
				if _, err := v.verify(b.Context(), token, time.Now()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
