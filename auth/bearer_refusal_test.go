package auth

import (
	"strings"
	"testing"
	"time"

	"usersd/auth/oidctest"
)

// TestABearerTokenIsRefusedForWhatIsWrongWithIt signs each token with the issuer's real key, so
// that its signature verifies, and checks that the refusal names what is wrong instead: a claim
// of the wrong type, or a critical header parameter that this server does not understand.
func TestABearerTokenIsRefusedForWhatIsWrongWithIt(t *testing.T) {
	iss := oidctest.Start(t)
	gate := gateWith(t, GateConfig{Bearer: &BearerConfig{Issuer: iss.URL, Audience: gateAudience}})
	claimsWith := func(name string, value any) map[string]any {
		claims := iss.Claims(gateAudience, "robot", "users.write")
		claims[name] = value
		return claims
	}
	for _, c := range []struct {
		name  string
		token string
		want  string // a part of the refusal
	}{
		{"exp is a string", iss.Sign(t, "rs256", claimsWith("exp", "tomorrow")), "its exp claim is malformed"},
		{"exp is an object", iss.Sign(t, "es256", claimsWith("exp", map[string]any{"at": 1})), "its exp claim is malformed"},
		{"nbf is a string", iss.Sign(t, "eddsa", claimsWith("nbf", "now")), "its nbf claim is malformed"},
		{"iat is a boolean", iss.Sign(t, "rs256", claimsWith("iat", true)), "its iat claim is malformed"},
		{"iss is a number", iss.Sign(t, "rs256", claimsWith("iss", 7)), "its iss claim is malformed"},
		{"sub is an array", iss.Sign(t, "rs256", claimsWith("sub", []string{"a", "b"})), "its sub claim is malformed"},
		{"aud is a number", iss.Sign(t, "rs256", claimsWith("aud", 7)), "its aud claim is malformed"},
		{"scope is a number", iss.Sign(t, "rs256", claimsWith("scope", 7)), "its scope claim is malformed"},
		{"the payload is an array, not claims",
			iss.SignPayload(t, "rs256", []byte(`[1, 2]`)), "its payload is not a JSON object of claims"},
		{"crit names an extension", iss.SignWithHeader(t, "rs256",
			map[string]any{"crit": []string{"exp-ext"}, "exp-ext": true}, iss.Claims(gateAudience, "robot", "users.write")),
			"it has critical header parameters (crit) that this server does not understand"},
		{"crit names a registered parameter", iss.SignWithHeader(t, "es256",
			map[string]any{"crit": []string{"kid"}}, iss.Claims(gateAudience, "robot", "users.write")),
			"it has critical header parameters (crit) that this server does not understand"},
		{"a signature that does not verify is still said so",
			oidctest.Tampered(t, iss.Sign(t, "rs256", iss.Claims(gateAudience, "robot", "users.write")),
				iss.Claims(gateAudience, "intruder", "users.write")),
			"its signature does not verify"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := gate.Decide(t.Context(), Request{Authorization: "Bearer " + c.token, Need: ScopeWrite, Now: time.Now()})
			if d.Verdict != BadCredential || d.Err == nil || !strings.Contains(d.Err.Error(), c.want) {
				t.Fatalf("verdict %v, error %v; want a refusal that says %q", d.Verdict, d.Err, c.want)
			}
			if c.want != "its signature does not verify" && strings.Contains(d.Err.Error(), "signature") {
				t.Errorf("the refusal blames the signature, which verifies: %v", d.Err)
			}
		})
	}
}
