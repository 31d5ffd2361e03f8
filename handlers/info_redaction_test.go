package handlers

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"usersd/internal/apitest"
)

// TestInfoRedactsHeadersNamedLikeSecrets sends each header to /info on a real server and checks
// that a header whose name suggests a secret is shown only as [redacted], whatever its case, and
// that any other header is shown as sent.
func TestInfoRedactsHeadersNamedLikeSecrets(t *testing.T) {
	s := startServer(t)
	c := apitest.NewH2CClient()
	for _, tc := range []struct {
		name     string
		redacted bool
	}{
		{"X-Pass", true},
		{"X-Passphrase", true},
		{"X-Password", true},
		{"Passwd", true},
		{"X-Sig", true},
		{"X-Hub-Signature-256", true},
		{"X-Amz-Signed-Headers", true}, // only a name is read, so a harmless match is redacted too
		{"X-Api-Key", true},
		{"X-KEY", true},
		{"X-Access-Token", true},
		{"X-Client-Secret", true},
		{"Authorization", true},
		{"Proxy-Authorization", true},
		{"X-Auth", true},
		{"Cookie", true},
		{"Set-Cookie", true},
		{"X-Session-Id", true},
		{"X-SESSION", true},
		{"X-Csrf-Token", true},
		{"X-Custom", false},
		{"X-Request-Id", false},
		{"Accept-Language", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const value = "value-under-test"
			r, err := http.NewRequest("GET", s.BaseURL+"/info", nil)
			if err != nil {
				t.Fatal(err)
			}
			r.Header.Set(tc.name, value)
			res, err := c.Do(r)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			var info struct{ Headers map[string]string }
			if err := json.NewDecoder(res.Body).Decode(&info); err != nil {
				t.Fatal(err)
			}
			want := value
			if tc.redacted {
				want = "[redacted]"
			}
			if got := info.Headers[strings.ToLower(tc.name)]; got != want {
				t.Errorf("/info shows %s as %q, want %q", tc.name, got, want)
			}
		})
	}
}
