// The actor of a write: who the change log records as having made it.
package store

import "context"

// ActorType says which kind of credential an actor's name is of: an API key's name and a token's
// subject are chosen by different people, so one name may be two callers.
type ActorType int8

// The types of actor, as the change log stores them.
const (
	// ActorUnknown is no actor, or one recorded before its type was.
	ActorUnknown ActorType = iota
	ActorAPIKey
	ActorToken
)

// Actor is who makes a write: never a secret.
type Actor struct {
	// Name is the name of an API key or the subject of a token.
	Name string
	Type ActorType
}

type actorKey struct{}

// WithActor returns ctx for writes made by actor. The change log records it with each change the
// writes make.
func WithActor(ctx context.Context, actor Actor) context.Context {
	return context.WithValue(ctx, actorKey{}, actor)
}

// ActorOf returns the actor of ctx's writes; the zero Actor if none was given.
func ActorOf(ctx context.Context) Actor {
	actor, _ := ctx.Value(actorKey{}).(Actor)
	return actor
}
