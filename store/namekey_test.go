package store_test

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"usersd/store"
)

func TestNameKeyIsEqualExactlyWhenNamesFoldEqual(t *testing.T) {
	pairs := []struct {
		a, b  string
		equal bool
	}{
		{"Ada Lovelace", "ADA LOVELACE", true},
		{"ada", "Ada", true},
		{"Kelvin", "\u212Aelvin", true}, // the Kelvin sign folds with K and k
		{"ſam", "Sam", true},            // the long s folds with s and S
		{"Σίσυφος", "ΣΊΣΥΦΟΣ", true},    // final sigma, sigma and capital sigma share one orbit
		{"Straße", "STRASSE", false},    // full folding would equal them; simple folding does not
		{"İstanbul", "istanbul", false}, // dotted capital I has no simple fold to i
		{"Ada", "Adb", false},
		{"", "", true},
	}
	for _, p := range pairs {
		if got := store.NameKey(p.a) == store.NameKey(p.b); got != p.equal {
			t.Errorf("NameKey(%q) == NameKey(%q) is %v, want %v", p.a, p.b, got, p.equal)
		}
		if strings.EqualFold(p.a, p.b) != p.equal {
			t.Errorf("test case %q, %q disagrees with strings.EqualFold", p.a, p.b)
		}
	}
}

func TestNameKeyMatchesEqualFoldForEveryCharacter(t *testing.T) {
	// For every character with case, the key of the character must equal the key of every member of
	// its fold orbit, and differ from the key of a character outside it.
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if !utf8.ValidRune(r) || unicode.SimpleFold(r) == r {
			continue
		}
		key := store.NameKey(string(r))
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			if store.NameKey(string(f)) != key {
				t.Fatalf("NameKey(%U) = %q but NameKey(%U) = %q; they fold equal", r, key, f, store.NameKey(string(f)))
			}
		}
		if other := r + 1; utf8.ValidRune(other) && !strings.EqualFold(string(r), string(other)) && store.NameKey(string(other)) == key {
			t.Fatalf("NameKey(%U) = NameKey(%U) but they do not fold equal", r, other)
		}
	}
}

func TestNameKeyRangeHoldsExactlyTheKeysWithThePrefix(t *testing.T) {
	names := []string{"ada", "Ada Lovelace", "ADB", "ad", "a", "Grace", "adé", "ad\U0010FFFF", "ad\U0010FFFFz", "ae", "\uD7FF", "\uE000x"}
	prefixes := []string{"ad", "AD", "a", "ad\U0010FFFF", "\U0010FFFF", "\uD7FF", ""}
	for _, prefix := range prefixes {
		from, to := store.NameKeyRange(prefix)
		if !utf8.ValidString(from) || !utf8.ValidString(to) {
			t.Fatalf("NameKeyRange(%q) = %q, %q: not valid UTF-8", prefix, from, to)
		}
		for _, name := range names {
			key := store.NameKey(name)
			inRange := key >= from && (to == "" || key < to)
			hasPrefix := strings.HasPrefix(key, store.NameKey(prefix))
			if inRange != hasPrefix {
				t.Errorf("prefix %q, name %q: in range [%q, %q) is %v, but has the prefix is %v", prefix, name, from, to, inRange, hasPrefix)
			}
		}
	}
}
