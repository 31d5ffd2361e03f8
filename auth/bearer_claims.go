package auth

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/go-jose/go-jose/v4/jwt"
)

// bearerClaims are the claims read from a token: the registered ones, and its scopes.
type bearerClaims struct {
	jwt.Claims
	Scope string          `json:"scope"`
	Scp   json.RawMessage `json:"scp"` // a space-separated string, or an array of strings
}

// decodeBearerClaims reads the claims of a verified payload one by one, so that a refusal names
// the claim that is malformed: a token whose exp is a string is the issuer's mistake, not a
// forgery, and whoever debugs it needs to know which claim to fix. Claim names are matched
// exactly, as JWT (RFC 7519) wants, not in any case as encoding/json would match struct fields.
func decodeBearerClaims(payload []byte) (bearerClaims, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(payload, &fields); err != nil || fields == nil {
		return bearerClaims{}, errTokenInvalid{"its payload is not a JSON object of claims"}
	}
	var c bearerClaims
	for _, claim := range []struct {
		name string
		into any
	}{
		{"iss", &c.Issuer}, {"sub", &c.Subject}, {"aud", &c.Audience}, {"exp", &c.Expiry},
		{"nbf", &c.NotBefore}, {"iat", &c.IssuedAt}, {"jti", &c.ID}, {"scope", &c.Scope},
	} {
		raw, ok := fields[claim.name]
		if !ok {
			continue
		}
		if err := json.Unmarshal(raw, claim.into); err != nil {
			return bearerClaims{}, errTokenInvalid{fmt.Sprintf("its %s claim is malformed", claim.name)}
		}
	}
	c.Scp = fields["scp"]
	return c, nil
}

// scopes reads scope (space-separated) or, without it, scp (a string or an array of strings).
func (c bearerClaims) scopes() Scopes {
	if c.Scope != "" {
		return scopesOfClaim(c.Scope)
	}
	var list []string
	if json.Unmarshal(c.Scp, &list) == nil {
		return scopesOfClaim(strings.Join(list, " "))
	}
	var one string
	if json.Unmarshal(c.Scp, &one) == nil {
		return scopesOfClaim(one)
	}
	return 0
}

func claimError(err error) string {
	switch {
	case errors.Is(err, jwt.ErrExpired):
		return "it has expired"
	case errors.Is(err, jwt.ErrNotValidYet):
		return "it is not valid yet (nbf)"
	case errors.Is(err, jwt.ErrIssuedInTheFuture):
		return "it was issued in the future (iat)"
	case errors.Is(err, jwt.ErrInvalidIssuer):
		return "its issuer (iss) is not this service's"
	case errors.Is(err, jwt.ErrInvalidAudience):
		return "its audience (aud) is not this service"
	}
	return "its claims do not hold"
}
