package auth

import (
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"
)

// TestKeysFileLines reads the keys file lines of docs/ACCESS.md#keys-with-names-and-scopes: a key or its digest, then a name
// and scopes, each optional; and refuses every line that says something else, with why.
func TestKeysFileLines(t *testing.T) {
	const secret = "a-key-for-the-keys-file-0123"
	digest := fmt.Sprintf("sha256:%x", sha256.Sum256([]byte(secret)))
	for _, c := range []struct {
		line   string
		name   string
		scopes Scopes
	}{
		{secret, "key-" + digest[len("sha256:"):][:8], AllScopes},
		{secret + " name=dashboard scopes=users.read", "dashboard", ScopeRead},
		{secret + " scopes=users.write name=importer", "importer", ScopeWrite},
		{secret + " scopes=users.write,users.read", "key-" + digest[len("sha256:"):][:8], ScopeRead | ScopeWrite},
		{secret + " scopes=webhooks.manage", "key-" + digest[len("sha256:"):][:8], ScopeWebhooks},
		{digest + " name=ci@example.com", "ci@example.com", AllScopes},
		{"  " + digest + "\tname=a.b-c_d  ", "a.b-c_d", AllScopes},
	} {
		t.Run(c.line, func(t *testing.T) {
			key, err := ParseAPIKey(c.line)
			if err != nil {
				t.Fatal(err)
			}
			if key.Name != c.name || key.Scopes != c.scopes {
				t.Fatalf("name %q scopes %q, want %q %q", key.Name, key.Scopes, c.name, c.scopes)
			}
			keys := &APIKeys{}
			if err := keys.Add(key); err != nil {
				t.Fatal(err)
			}
			// The digest form and the key form are the same key: the secret finds it.
			found, _, ok := keys.find(secret)
			if !ok || found.Name != c.name {
				t.Fatalf("the key does not find its line: %v %+v", ok, found)
			}
			if line := key.Line(); !strings.HasPrefix(line, digest+" ") || strings.Contains(line, secret) {
				t.Fatalf("Line() = %q, want the digest and never the key", line)
			}
		})
	}
	for _, c := range []struct{ line, why string }{
		{"short-key", "at least 16"},
		{"sha256:abc", "64 hex digits"},
		{"sha256:" + strings.Repeat("g", 64), "64 hex digits"},
		{secret + " scopes=users.admin", `unknown scope "users.admin"`},
		{secret + " scopes=", "no scope"},
		{secret + " name=", "name"},
		{secret + " name=-starts-with-a-dash", "name"},
		{secret + " name=" + strings.Repeat("n", 65), "name"},
		{secret + " name=has/slash", "name"},
		{secret + " name=a name=b", "each once"},
		{secret + " role=admin", "name=<name> or scopes="},
		{secret + " " + secret, "field 2 is not name=<name> or scopes="}, // a second key is not quoted back
	} {
		t.Run(c.line, func(t *testing.T) {
			_, err := ParseAPIKey(c.line)
			if err == nil || !strings.Contains(err.Error(), c.why) {
				t.Fatalf("error %v, want one saying %q", err, c.why)
			}
			if err != nil && strings.Contains(err.Error(), secret) {
				t.Fatalf("the error %q shows the key", err)
			}
		})
	}
}

// TestTheSameKeyTwiceIsRefused: two lines of one key could disagree on its name or scopes, so the
// second is refused, whichever form each line takes; two keys under one name (a rotation) are not.
func TestTheSameKeyTwiceIsRefused(t *testing.T) {
	const secret = "a-key-for-the-keys-file-0123"
	keys := &APIKeys{}
	first, _ := ParseAPIKey(secret + " name=one")
	again, _ := ParseAPIKey(fmt.Sprintf("sha256:%x name=two scopes=users.read", sha256.Sum256([]byte(secret))))
	rotated, _ := ParseAPIKey("the-next-key-for-rotation-0123 name=one")
	if err := keys.Add(first); err != nil {
		t.Fatal(err)
	}
	if err := keys.Add(again); err == nil {
		t.Fatal("the same key was added twice")
	}
	if err := keys.Add(rotated); err != nil {
		t.Fatalf("a second key under the same name: %v", err)
	}
	if keys.Len() != 2 {
		t.Fatalf("Len %d, want 2", keys.Len())
	}
}
