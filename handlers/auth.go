// API keys: the one check that guards /private and every write, on REST and RPC alike.
package handlers

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"net/http"

	"connectrpc.com/connect"

	"usersd/users"
)

// APIKeyHeader carries the caller's key (gRPC metadata of the same name).
const APIKeyHeader = "x-api-key"

// APIKeys is a set of valid keys. Several keys may be valid at once, so that a key can be rotated
// without downtime.
type APIKeys struct {
	digests []keyDigest
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

// NewAPIKeys returns the set of the given keys; empty strings are ignored.
func NewAPIKeys(keys ...string) *APIKeys {
	k := &APIKeys{}
	for _, key := range keys {
		if key != "" {
			k.digests = append(k.digests, digestOf(key))
		}
	}
	return k
}

// Len reports how many keys are valid.
func (k *APIKeys) Len() int { return len(k.digests) }

// caller reports whether key is one of the set, comparing it against every key in constant time,
// and returns the caller's identity: the hex SHA-256 digest of the key, which names the caller in
// stored records without storing the key itself.
func (k *APIKeys) caller(key string) (string, bool) {
	if key == "" {
		return "", false
	}
	digest := digestOf(key)
	match := 0
	for i := range k.digests { // every key, even after a match, so that the time taken does not tell which one matched
		match |= digest.constantTimeEqual(&k.digests[i])
	}
	return digest.String(), match == 1
}

var errUnauthenticated = connect.NewError(connect.CodeUnauthenticated,
	errors.New("a valid API key is required in the x-api-key header"))

// requireAPIKey lets a request through only with a valid key. It runs before the handler reads
// anything, so a write without a key is refused whatever its body.
func requireAPIKey(keys *APIKeys, errs *errorWriter, metrics *metrics, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get(APIKeyHeader)
		caller, ok := keys.caller(key)
		if !ok {
			reason := "invalid"
			if key == "" {
				reason = "missing"
			}
			metrics.refusedKey("api_key", reason)
			errs.write(w, r, errUnauthenticated)
			return
		}
		next.ServeHTTP(w, r.WithContext(users.WithCaller(r.Context(), users.Caller{ID: caller})))
	})
}
