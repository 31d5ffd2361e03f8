// Scopes: what a caller may do. A route needs one scope or none; a credential holds a set.
package auth

import (
	"fmt"
	"strings"
)

// Scopes is a set of scopes.
type Scopes uint8

const (
	// ScopeRead allows every read of users, watches included.
	ScopeRead Scopes = 1 << iota
	// ScopeWrite allows every change of users.
	ScopeWrite
	// ScopeWebhooks allows managing webhook subscriptions, reads included: a subscription sends
	// every change of users to a URL of its maker's choosing.
	ScopeWebhooks

	// AllScopes is what an API key holds unless its line says otherwise.
	AllScopes = ScopeRead | ScopeWrite | ScopeWebhooks
)

// scopeNames are the scopes as credentials spell them.
var scopeNames = []struct {
	scope Scopes
	name  string
}{{ScopeRead, "users.read"}, {ScopeWrite, "users.write"}, {ScopeWebhooks, "webhooks.manage"}}

// Has reports whether s holds every scope of want.
func (s Scopes) Has(want Scopes) bool { return s&want == want }

// String spells s as a space-separated list, as an OAuth scope claim does.
func (s Scopes) String() string {
	var names []string
	for _, n := range scopeNames {
		if s.Has(n.scope) {
			names = append(names, n.name)
		}
	}
	return strings.Join(names, " ")
}

// scopeNamed returns the scope spelt name, and whether there is one.
func scopeNamed(name string) (Scopes, bool) {
	for _, n := range scopeNames {
		if n.name == name {
			return n.scope, true
		}
	}
	return 0, false
}

// parseScopeList reads a keys file's comma-separated list of scopes. Every name must be known: a
// line that names a scope this version does not know is refused, rather than read as fewer scopes.
func parseScopeList(list string) (Scopes, error) {
	var s Scopes
	for name := range strings.SplitSeq(list, ",") {
		if name == "" {
			continue
		}
		scope, ok := scopeNamed(name)
		if !ok {
			return 0, fmt.Errorf("unknown scope %q (known: %s)", name, AllScopes)
		}
		s |= scope
	}
	if s == 0 {
		return 0, fmt.Errorf("no scope in %q", list)
	}
	return s, nil
}

// scopesOfClaim reads the scopes of a token's claim, space-separated; the names it does not know
// (scopes of other services) are left out.
func scopesOfClaim(claim string) Scopes {
	var s Scopes
	for name := range strings.FieldsSeq(claim) {
		if scope, ok := scopeNamed(name); ok {
			s |= scope
		}
	}
	return s
}
