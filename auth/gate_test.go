package auth

import (
	"context"
	"strings"
	"testing"
	"time"

	"usersd/auth/oidctest"
)

const (
	gateFullKey   = "gate-test-full-key-0123456789"
	gateReaderKey = "gate-test-reader-key-0123456789"
	gateAudience  = "usersd-test"
)

// gateKeys holds a key with both scopes, named full, and one that only reads, named reader.
func gateKeys(t *testing.T) *APIKeys {
	keys := &APIKeys{}
	for _, line := range []string{gateFullKey + " name=full", gateReaderKey + " name=reader scopes=users.read"} {
		key, err := ParseAPIKey(line)
		if err != nil {
			t.Fatal(err)
		}
		if err := keys.Add(key); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

// gateWith returns a gate of gateKeys with config's other settings, and waits for its issuer's
// keys, if it has one.
func gateWith(t *testing.T, config GateConfig) *Gate {
	config.Keys = gateKeys(t)
	g, err := NewGate(config)
	if err != nil {
		t.Fatal(err)
	}
	if g.bearer != nil {
		ctx, cancel := context.WithCancel(t.Context())
		t.Cleanup(cancel)
		go g.KeepKeys(ctx)
		for deadline := time.Now().Add(10 * time.Second); !g.bearer.loaded(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the issuer's keys were not loaded within 10 s")
			}
		}
	}
	return g
}

// TestTheGatesDecision is the decision in front of every route of users, case by case: who
// passes, as whom, and why the others are refused. No socket is involved but the token issuer's.
func TestTheGatesDecision(t *testing.T) {
	iss := oidctest.Start(t)
	token := func(subject, scope string) string {
		return "Bearer " + iss.Sign(t, "rs256", iss.Claims(gateAudience, subject, scope))
	}
	expired := iss.Claims(gateAudience, "late", "users.read users.write")
	expired["exp"] = time.Now().Add(-time.Hour).Unix()

	public := gateWith(t, GateConfig{Bearer: &BearerConfig{Issuer: iss.URL, Audience: gateAudience}})
	private := gateWith(t, GateConfig{PrivateReads: true})
	type want struct {
		verdict    Verdict
		name       string // the identity's; "" passes as anyone
		challenge  string // a prefix of it
		keyRefused string
		err        string // a part of the message
	}
	for _, c := range []struct {
		name string
		gate *Gate
		req  Request
		want want
	}{
		{"a public read without a credential passes as anyone", public,
			Request{Need: ScopeRead, PublicRead: true}, want{verdict: Pass}},
		{"a read without a credential is refused while reads are private", private,
			Request{Need: ScopeRead, PublicRead: true}, want{verdict: NoCredential, keyRefused: "missing", err: "x-api-key"}},
		{"a write without a credential is refused", public,
			Request{Need: ScopeWrite}, want{verdict: NoCredential, keyRefused: "missing"}},
		{"a key with both scopes writes as its name", public,
			Request{APIKey: gateFullKey, Need: ScopeWrite}, want{verdict: Pass, name: "full"}},
		{"a read-only key may not write", public,
			Request{APIKey: gateReaderKey, Need: ScopeWrite},
			want{verdict: MissingScope, err: "API key named reader does not hold the users.write scope"}},
		{"a read-only key reads as its name", private,
			Request{APIKey: gateReaderKey, Need: ScopeRead, PublicRead: true}, want{verdict: Pass, name: "reader"}},
		{"a wrong key on a public read passes as anyone", public,
			Request{APIKey: "not-a-key-0123456789", Need: ScopeRead, PublicRead: true}, want{verdict: Pass}},
		{"a wrong key on a write is refused as invalid", public,
			Request{APIKey: "not-a-key-0123456789", Need: ScopeWrite}, want{verdict: BadCredential, keyRefused: "invalid"}},
		{"a key and a token together are refused", public,
			Request{APIKey: gateFullKey, Authorization: token("robot", "users.write"), Need: ScopeWrite},
			want{verdict: BadCredential, keyRefused: "invalid", err: "not both"}},
		{"an Authorization that is not a bearer token is refused with a challenge", public,
			Request{Authorization: "Basic dXNlcjpwYXNz", Need: ScopeWrite},
			want{verdict: BadCredential, challenge: `Bearer error="invalid_token"`, err: "Authorization: Bearer <token>"}},
		{"a bearer token without an issuer is refused", private,
			Request{Authorization: token("robot", "users.write"), Need: ScopeWrite},
			want{verdict: BadCredential, challenge: `Bearer error="invalid_token"`, err: "no -jwt-issuer"}},
		{"a token in the URL is refused, whatever else the request carries", public,
			Request{TokenInURL: true, APIKey: gateFullKey, Need: ScopeRead, PublicRead: true},
			want{verdict: BadCredential, challenge: `Bearer error="invalid_request"`, err: "token in the URL"}},
		{"a valid token writes as its subject", public,
			Request{Authorization: token("robot", "users.read users.write"), Need: ScopeWrite}, want{verdict: Pass, name: "robot"}},
		{"a token without the scope is refused with insufficient_scope", public,
			Request{Authorization: token("viewer", "users.read"), Need: ScopeWrite},
			want{verdict: MissingScope, challenge: `Bearer error="insufficient_scope", scope="users.write"`, err: "bearer token of viewer"}},
		{"an expired token is refused", public,
			Request{Authorization: "Bearer " + iss.Sign(t, "rs256", expired), Need: ScopeWrite},
			want{verdict: BadCredential, challenge: `Bearer error="invalid_token"`, err: "expired"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.req.Now = time.Now()
			d := c.gate.Decide(t.Context(), c.req)
			if d.Verdict != c.want.verdict || d.Identity.Name != c.want.name || !strings.HasPrefix(d.Challenge, c.want.challenge) ||
				(c.want.challenge == "") != (d.Challenge == "") || d.KeyRefused != c.want.keyRefused {
				t.Errorf("decision %+v; want %+v", d, c.want)
			}
			if (d.Err == nil) != (c.want.verdict == Pass) || d.Err != nil && !strings.Contains(d.Err.Error(), c.want.err) {
				t.Errorf("error %v; want one that says %q", d.Err, c.want.err)
			}
			if d.Limited {
				t.Error("a gate without a rate limit says it limited the request")
			}
		})
	}
}

// TestBearerTokensWaitForTheIssuersKeys: until the issuer's keys are loaded, the gate cannot tell
// a good token from a bad one, and says so rather than refusing it.
func TestBearerTokensWaitForTheIssuersKeys(t *testing.T) {
	iss := oidctest.Start(t)
	g, err := NewGate(GateConfig{Keys: gateKeys(t), Bearer: &BearerConfig{Issuer: iss.URL, Audience: gateAudience}})
	if err != nil {
		t.Fatal(err)
	}
	d := g.Decide(t.Context(), Request{Authorization: "Bearer " + iss.Sign(t, "rs256", iss.Claims(gateAudience, "robot", "users.write")),
		Need: ScopeWrite, Now: time.Now()})
	if d.Verdict != Unavailable || d.KeyRefused != "" || d.Challenge != "" {
		t.Fatalf("decision %+v before the keys are loaded; want Unavailable", d)
	}
}

// TestTheGateTakesFromEachCallersBucket: a caller is its key's name, or its address without a
// valid credential; a caller over its rate is refused with when to come back, and an address whose
// wrong credentials spent its failures' bucket has no credential looked at, not even a right one.
func TestTheGateTakesFromEachCallersBucket(t *testing.T) {
	now := time.Now()
	decide := func(g *Gate, key, address string) Decision {
		return g.Decide(t.Context(), Request{APIKey: key, RemoteAddr: address, Need: ScopeRead, PublicRead: true, Now: now})
	}
	t.Run("each caller its own bucket", func(t *testing.T) {
		g := gateWith(t, GateConfig{RateLimit: 1, RateBurst: 2})
		for i, want := range []Verdict{Pass, Pass, OverRate} {
			if d := decide(g, gateFullKey, "192.0.2.1:1000"); d.Verdict != want || !d.Limited {
				t.Fatalf("request %d of the key: %+v; want %v, limited", i+1, d, want)
			}
		}
		// The same key from another address is the same caller; the address alone is another.
		if d := decide(g, gateFullKey, "192.0.2.2:1000"); d.Verdict != OverRate || d.Rate.RetryAfter() != 1 {
			t.Fatalf("the key from another address: %+v; want OverRate, retry in 1 s", d)
		}
		if d := decide(g, "", "192.0.2.1:1001"); d.Verdict != Pass || d.Rate.Remaining != 1 {
			t.Fatalf("the address without a key: %+v; want Pass with 1 left", d)
		}
	})
	t.Run("guesses spend the address's failures", func(t *testing.T) {
		g := gateWith(t, GateConfig{RateLimit: 1, RateBurst: 3})
		for i := range 3 {
			if d := decide(g, "guess-0123456789abcdef"+string(rune('a'+i)), "2001:db8::1"); d.Verdict != Pass {
				t.Fatalf("guess %d on a public read: %+v; want it served as to anyone", i+1, d)
			}
		}
		// Another address of the same /64 is the same client.
		if d := decide(g, gateFullKey, "[2001:db8::2]:443"); d.Verdict != OverRate {
			t.Fatalf("the right key after three wrong ones from the same /64: %+v; want OverRate", d)
		}
		if d := decide(g, gateFullKey, "[2001:db8:0:1::2]:443"); d.Verdict != Pass || d.Identity.Name != "full" {
			t.Fatalf("the right key from another /64: %+v; want Pass as full", d)
		}
	})
}
