package handlers

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"usersd/auth"
	"usersd/auth/oidctest"
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
		Store: observedStore, Keys: testKeys(benchAPIKey), Metrics: registry,
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), AccessLog: io.Discard,
		Background: b.Context(), Bearer: &auth.BearerConfig{Issuer: iss.URL, Audience: bearerAudience},
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
