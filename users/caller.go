// The caller of a request: who the service acts for, put in the request's context by whatever
// checked the caller's credentials (the HTTP face), and read by the rules that depend on it.
package users

import (
	"context"
	"time"
)

// Caller is who makes a request.
type Caller struct {
	// ID names the caller in stored records, such as the owner of an idempotency key. It is never
	// a secret: for an API key, the hex SHA-256 digest of the key.
	ID string
	// Name is who the caller is to people: the API key's name or the token's subject. It is what
	// the change log records as a change's actor, and what logs and traces name.
	Name string
	// Expires is when the credential stops being valid (a bearer token's expiry); zero for one that
	// does not expire (an API key). A watch ends then.
	Expires time.Time
}

type callerKey struct{}

// WithCaller returns a context that carries caller.
func WithCaller(ctx context.Context, caller Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, caller)
}

// CallerOf returns the caller that ctx carries, and whether it carries one: a request whose
// credentials were not checked (a public read) has none.
func CallerOf(ctx context.Context) (Caller, bool) {
	caller, ok := ctx.Value(callerKey{}).(Caller)
	return caller, ok && caller.ID != ""
}
