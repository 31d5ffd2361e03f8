package handlers

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/prometheus/client_golang/prometheus"

	"usersd/internal/oidctest"
	"usersd/store/observed"
)

// BenchmarkRESTCreateUserCredential is BenchmarkRESTCreateUser with each kind of credential: an
// API key, and a bearer token that has been verified once (the cache), so that their costs can be
// compared in one run. Not a test: compare the numbers with benchstat, e.g.
//
//	go test -run '^$' -bench RESTCreateUserCredential -count 10 ./handlers | benchstat -col /credential -
func BenchmarkRESTCreateUserCredential(b *testing.B) {
	iss := oidctest.Start(b)
	registry := prometheus.NewRegistry()
	observedStore, err := observed.New(newBenchStore(), observed.Options{Metrics: registry, System: "memory"})
	if err != nil {
		b.Fatal(err)
	}
	h, err := New(Config{
		Store: observedStore, Keys: NewAPIKeys(benchAPIKey), Metrics: registry,
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), AccessLog: io.Discard,
		Background: b.Context(), Bearer: &BearerConfig{Issuer: iss.URL, Audience: bearerAudience},
	})
	if err != nil {
		b.Fatal(err)
	}
	token := iss.Sign(b, "es256", iss.Claims(bearerAudience, "bench-robot", "users.write"))
	body := []byte(`{"name":"Bench User","role":"viewer"}`)
	for _, c := range []struct{ name, header, value string }{
		{"credential=key", APIKeyHeader, benchAPIKey},
		{"credential=jwt-cached", "Authorization", "Bearer " + token},
	} {
		req := httptest.NewRequest(http.MethodPost, "/users", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(c.header, c.value)
		waitForBenchKeys(b, h, req, body)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				benchServe(b, h, req, body, http.StatusCreated)
			}
		})
	}
}

// waitForBenchKeys sends req until it is no longer refused for keys still loading.
func waitForBenchKeys(b *testing.B, h http.Handler, req *http.Request, body []byte) {
	b.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, benchCopy(req, body))
		if rec.Code == http.StatusCreated {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("the credential is refused: %d %s", rec.Code, rec.Body)
		}
	}
}

// BenchmarkBearerVerifyUnseen is the verification of a token the service has not seen: parsing,
// the signature and the claims, by algorithm (the cache is emptied before each).
func BenchmarkBearerVerifyUnseen(b *testing.B) {
	iss := oidctest.Start(b)
	v, err := newBearerVerifier(BearerConfig{Issuer: iss.URL, Audience: bearerAudience}, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	go v.keepKeys(b.Context())
	for !v.loaded() {
		time.Sleep(10 * time.Millisecond)
	}
	for _, alg := range []jose.SignatureAlgorithm{jose.RS256, jose.ES256, jose.EdDSA} {
		token := iss.Sign(b, map[jose.SignatureAlgorithm]string{jose.RS256: "rs256", jose.ES256: "es256", jose.EdDSA: "eddsa"}[alg],
			iss.Claims(bearerAudience, "bench-robot", "users.write"))
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
