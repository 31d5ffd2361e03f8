// The caller of a request: who the service acts for, put in the request's context by whatever
// checked the caller's credentials (the HTTP face), and read by the rules that depend on it.
package users

import (
	"context"
	"time"

	"usersd/store"
)

// Caller is who makes a request.
type Caller struct {
	// ID names the caller in stored records, such as the owner of an idempotency key. It is never
	// a secret: for an API key, the hex SHA-256 digest of the key.
	ID string
	// Name is who the caller is to people: the API key's name or the token's subject. It is what
	// the change log records as a change's actor, and what logs and traces name.
	Name string
	// Token says that the credential is a bearer token, whose subject Name is; otherwise Name is
	// an API key's name. The change log records it beside the name: the two are chosen by
	// different people, so one name may be two callers.
	Token bool
	// Expires is when the credential stops being valid (a bearer token's expiry); zero for one that
	// does not expire (an API key). A watch ends then.
	Expires time.Time
}

// actor is the caller as the change log records who made a change.
func (c Caller) actor() store.Actor {
	if c.Token {
		return store.Actor{Name: c.Name, Type: store.ActorToken}
	}
	return store.Actor{Name: c.Name, Type: store.ActorAPIKey}
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
