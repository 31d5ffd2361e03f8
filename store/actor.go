// The actor of a write: who the change log records as having made it.
package store

import "context"

type actorKey struct{}

// WithActor returns ctx for writes made by actor: the name of an API key or the subject of a token,
// never a secret. The change log records it with each change the writes make.
func WithActor(ctx context.Context, actor string) context.Context {
	return context.WithValue(ctx, actorKey{}, actor)
}

// ActorOf returns the actor of ctx's writes; "" if none was given.
func ActorOf(ctx context.Context) string {
	actor, _ := ctx.Value(actorKey{}).(string)
	return actor
}
