package auth

import (
	"crypto/sha256"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// authTestKey is a valid key of the tests below.
const authTestKey = "auth-test-key-0123456789abcdef"

// TestKeyDigestsCompareOnlyInConstantTime: == on keyDigest must not compile, so that the
// constant-time comparison is the only one there is.
func TestKeyDigestsCompareOnlyInConstantTime(t *testing.T) {
	// TypeOf, not TypeFor: go1.26.8's linker panics on TypeFor[T]().Comparable() for a comparable
	// struct T, which would turn this test's failure into a build error.
	if reflect.TypeOf(keyDigest{}).Comparable() {
		t.Fatal("keyDigest is comparable: == on it would compile and may stop at the first differing byte")
	}
	right := digestOf(authTestKey)
	for _, c := range []struct {
		name, key string
		want      int
	}{
		{"the same key", authTestKey, 1},
		{"another key of the same length", strings.Repeat("x", len(authTestKey)), 0},
		{"the key's last character changed", authTestKey[:len(authTestKey)-1] + "X", 0},
		{"a prefix of the key", authTestKey[:len(authTestKey)-1], 0},
		{"the key and one more character", authTestKey + "0", 0},
		{"the empty key", "", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			other := digestOf(c.key)
			if got := right.constantTimeEqual(&other); got != c.want {
				t.Errorf("right.constantTimeEqual(%q) = %d, want %d", c.key, got, c.want)
			}
			if got := other.constantTimeEqual(&right); got != c.want {
				t.Errorf("constantTimeEqual(%q, right) = %d, want %d", c.key, got, c.want)
			}
		})
	}
}

// TestAPIKeysRejectNearMisses: only an exact key passes, however much of a valid key another
// shares, and every configured key passes, so that keys can be rotated.
func TestAPIKeysRejectNearMisses(t *testing.T) {
	const other = "second-key-for-rotation-abcdef"
	keys := testKeys(authTestKey, other, "")
	if keys.Len() != 2 {
		t.Fatalf("Len %d, want 2 (the empty key is ignored)", keys.Len())
	}
	for _, key := range []string{authTestKey, other} {
		_, caller, ok := keys.find(key)
		if !ok {
			t.Errorf("find(%q) refuses it", key)
		}
		// Stored idempotency records name their caller by this digest: it must not change.
		if want := fmt.Sprintf("%x", sha256.Sum256([]byte(key))); caller != want {
			t.Errorf("find(%q) digest %q, want its hex SHA-256 %q", key, caller, want)
		}
	}
	for _, c := range []struct{ name, key string }{
		{"empty", ""},
		{"all but the last character (a prefix)", authTestKey[:len(authTestKey)-1]},
		{"the first character only", authTestKey[:1]},
		{"the last character changed (the longest shared prefix)", authTestKey[:len(authTestKey)-1] + "X"},
		{"the first character changed (no shared prefix)", "X" + authTestKey[1:]},
		{"the key and one more character", authTestKey + "0"},
		{"the key twice", authTestKey + authTestKey},
		{"the key with a NUL byte after it", authTestKey + "\x00"},
		{"the key in upper case", strings.ToUpper(authTestKey)},
		{"the key with spaces around it", " " + authTestKey + " "},
		{"the two keys joined", authTestKey + "," + other},
		{"a long key that starts with the key", authTestKey + strings.Repeat("x", 1<<16)},
	} {
		if _, _, ok := keys.find(c.key); ok {
			t.Errorf("find(%s) accepts it", c.name)
		}
	}
}

// BenchmarkAPIKeyCheck times APIKeys.find for keys that share nothing, a long prefix, or everything
// with a valid key. Not a test: compare the numbers with benchstat, e.g.
//
//	go test -run '^$' -bench APIKeyCheck -count 10 ./auth | benchstat -col /key -
func BenchmarkAPIKeyCheck(b *testing.B) {
	valid := strings.Repeat("k", 64)
	keys := testKeys(valid, "another-valid-key")
	for _, c := range []struct{ name, key string }{
		{"key=no-shared-prefix", "X" + valid[1:]},
		{"key=long-shared-prefix", valid[:63] + "X"},
		{"key=exact", valid},
		{"key=short", "k"},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				keys.find(c.key)
			}
		})
	}
}

// testKeys returns the set of the given keys, each holding both scopes; empty strings are left out.
func testKeys(keys ...string) *APIKeys {
	k := &APIKeys{}
	for _, key := range keys {
		if key != "" {
			if err := k.Add(NewAPIKey(key)); err != nil {
				panic(err)
			}
		}
	}
	return k
}
