// The search key of a name: what the case-insensitive name search of ListUsers compares.
package store

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// NameKey returns the key under which a name is searched: each character replaced by the smallest
// character that Unicode simple case folding makes equal to it ("Ada" and "ADA" both give "ADA";
// the Kelvin sign, "k" and "K" all give "K"). Two names are equal under simple case folding exactly
// when their keys are equal, and since folding maps one character to one character, a name starts
// with a prefix, ignoring case, exactly when its key starts with the prefix's key.
//
// Backends store the key next to the name and index it: it is computed here, once, rather than by
// each database's own lower(), which differ (SQLite folds only ASCII; PostgreSQL's depends on the
// collation) and do not follow Unicode's case folding.
func NameKey(name string) string {
	ascii := true
	for i := 0; i < len(name); i++ {
		if name[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii {
		// Every ASCII letter's fold orbit has the upper-case letter as its smallest member
		// ("k" also folds with the Kelvin sign U+212A, "s" with the long s U+017F: both larger).
		return strings.ToUpper(name)
	}
	return strings.Map(foldToSmallest, name)
}

// foldToSmallest returns the smallest character of r's simple case folding orbit.
func foldToSmallest(r rune) rune {
	smallest := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		smallest = min(smallest, f)
	}
	return smallest
}

// NameKeyRange returns the range [from, to) of keys that start with prefix's key, for an index
// range scan on the key column; to is "" when no upper bound is needed. Both backends compare the
// key byte-wise (COLLATE "C" on PostgreSQL, BINARY on SQLite), and byte order is code point order
// in UTF-8, so the successor of the key's last character bounds every key with that prefix. The
// bound stays valid UTF-8, which PostgreSQL requires of text.
func NameKeyRange(prefix string) (from, to string) {
	from = NameKey(prefix)
	upper := []rune(from)
	for len(upper) > 0 {
		last := upper[len(upper)-1]
		next := last + 1
		if next == 0xD800 { // surrogates are not characters: skip them
			next = 0xE000
		}
		if next <= unicode.MaxRune {
			upper[len(upper)-1] = next
			return from, string(upper)
		}
		upper = upper[:len(upper)-1] // the largest character has no successor: bound the prefix before it
	}
	return from, ""
}
