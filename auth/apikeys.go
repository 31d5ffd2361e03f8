// API keys: a key names its holder and holds scopes. Only the SHA-256 digest of a key is kept, and
// a keys file may hold digests alone, so that it holds no secret.
package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// MinAPIKeyLength is the shortest key accepted: a key is a password that scripts send, and one a
// person could guess or type from memory is too short.
const MinAPIKeyLength = 16

// APIKey is one valid key: its digest, the name that logs, traces and the change log record for
// its holder (never the key), and its scopes.
type APIKey struct {
	digest keyDigest
	Name   string
	Scopes Scopes
}

// keyDigest is the SHA-256 digest of a key. Only digests are kept and compared: digests all have
// one length, so comparing them in constant time tells nothing about how long a key is or how much
// of it matched. The zero-length func array makes the type incomparable, so == (which may stop at
// the first differing byte) does not compile, and constantTimeEqual is its only comparison.
type keyDigest struct {
	_   [0]func()
	sum [sha256.Size]byte
}

func digestOf(key string) keyDigest { return keyDigest{sum: sha256.Sum256([]byte(key))} }

// constantTimeEqual returns 1 if d and o are digests of the same key and 0 otherwise, in time that
// does not depend on their content. It returns an int, as crypto/subtle does, so that a caller can
// fold the answers for every key with | instead of stopping at a match.
func (d *keyDigest) constantTimeEqual(o *keyDigest) int {
	return subtle.ConstantTimeCompare(d.sum[:], o.sum[:])
}

// String is the hex digest, which names a caller in stored records without storing the key.
func (d *keyDigest) String() string { return hex.EncodeToString(d.sum[:]) }

// DigestPrefix starts a keys file line that gives a key's digest instead of the key.
const DigestPrefix = "sha256:"

// validKeyName is what a key's name may be: it goes into logs, metric-free records and the change
// log, so it is short and plain.
var validKeyName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$`)

// NewAPIKey returns a key that holds both scopes, named after its digest.
func NewAPIKey(secret string) APIKey {
	d := digestOf(secret)
	return APIKey{digest: d, Name: defaultKeyName(&d), Scopes: AllScopes}
}

// defaultKeyName names a key that its line does not name: by the start of its digest, which says
// nothing usable about the key and stays the same across restarts.
func defaultKeyName(d *keyDigest) string { return "key-" + d.String()[:8] }

// ParseAPIKey reads one line of a keys file: `<key> [name=<name>] [scopes=<scope>,<scope>]`, where
// <key> may instead be `sha256:<64 hex digits>`, the key's digest. A line without scopes= holds
// both scopes; one without name= is named after its digest.
func ParseAPIKey(line string) (APIKey, error) {
	fields := strings.Fields(line)
	if len(fields) == 0 {
		return APIKey{}, errors.New("no key")
	}
	var k APIKey
	if hexDigest, ok := strings.CutPrefix(fields[0], DigestPrefix); ok {
		sum, err := hex.DecodeString(hexDigest)
		if err != nil || len(sum) != sha256.Size {
			return APIKey{}, fmt.Errorf("%s must be followed by the 64 hex digits of the key's SHA-256 digest", DigestPrefix)
		}
		copy(k.digest.sum[:], sum)
	} else {
		if len(fields[0]) < MinAPIKeyLength {
			return APIKey{}, fmt.Errorf("the key has %d characters; a key needs at least %d", len(fields[0]), MinAPIKeyLength)
		}
		k.digest = digestOf(fields[0])
	}
	k.Name, k.Scopes = defaultKeyName(&k.digest), AllScopes
	seen := map[string]bool{}
	for i, field := range fields[1:] {
		// A field that is not understood is not quoted: it may be a second key, pasted by mistake.
		attribute, value, ok := strings.Cut(field, "=")
		if !ok || seen[attribute] {
			return APIKey{}, fmt.Errorf("field %d is not name=<name> or scopes=<scope>,<scope> (each once)", i+2)
		}
		seen[attribute] = true
		switch attribute {
		case "name":
			if !validKeyName.MatchString(value) {
				return APIKey{}, fmt.Errorf("name %q: a name is 1 to 64 letters, digits and . _ @ -, starting with a letter or digit", value)
			}
			k.Name = value
		case "scopes":
			scopes, err := parseScopeList(value)
			if err != nil {
				return APIKey{}, fmt.Errorf("scopes: %w", err)
			}
			k.Scopes = scopes
		default:
			return APIKey{}, fmt.Errorf("field %d is not name=<name> or scopes=<scope>,<scope>", i+2)
		}
	}
	return k, nil
}

// Line is the keys file line of k: its digest, name and scopes; never the key.
func (k APIKey) Line() string {
	return fmt.Sprintf("%s%s name=%s scopes=%s", DigestPrefix, k.digest.String(), k.Name, strings.ReplaceAll(k.Scopes.String(), " ", ","))
}

// APIKeys is a set of valid keys. Several keys may be valid at once, under one name or several, so
// that a key can be rotated without downtime.
type APIKeys struct {
	keys []APIKey
}

// Add adds key to the set. The same key twice is refused: its two lines could disagree on its name
// or scopes.
func (k *APIKeys) Add(key APIKey) error {
	for i := range k.keys {
		if k.keys[i].digest.constantTimeEqual(&key.digest) == 1 {
			return fmt.Errorf("the key named %s is already in the set (as %s)", key.Name, k.keys[i].Name)
		}
	}
	k.keys = append(k.keys, key)
	return nil
}

// Len reports how many keys are valid.
func (k *APIKeys) Len() int { return len(k.keys) }

// find returns the key that secret is, comparing it against every key in constant time, and its
// digest: the hex SHA-256 of the key, which names the caller in stored records (the owner of an
// idempotency key) without storing the key itself.
func (k *APIKeys) find(secret string) (key *APIKey, digest string, ok bool) {
	if secret == "" {
		return nil, "", false
	}
	d := digestOf(secret)
	found := -1
	for i := range k.keys { // every key, even after a match, so that the time taken does not tell which one matched
		found = subtle.ConstantTimeSelect(d.constantTimeEqual(&k.keys[i].digest), i, found)
	}
	if found < 0 {
		return nil, "", false
	}
	return &k.keys[found], d.String(), true
}
