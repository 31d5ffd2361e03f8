// A call of the service: what a face knows of a request beyond its message, and what the rules
// tell the face back beyond the answer. Every face hands it over the same way (WithCall), so that
// REST and the RPC protocols reach each operation through its one method.
package users

import "context"

// Call is one request's exchange with the service beside its message. The face that makes the
// call sets the fields of the request before it calls; the service sets the fields of the answer,
// and the face writes them in its protocol's headers once the method returns.
type Call struct {
	// ConsistencyToken is the Consistency-Token the request sent; "" for none. Set by the face.
	ConsistencyToken string
	// Primary makes the request's reads go to the primary: a conditional request's, whose answer
	// depends on the newest version of a user. Set by the face.
	Primary bool
	// ShowDeleted makes GetUser find a deleted user that is not yet purged: REST's showDeleted,
	// which GetUserRequest has no field for. Set by the face.
	ShowDeleted bool

	// AnsweredToken is the Consistency-Token of a write that succeeded; "" otherwise. Set by the
	// service (answerToken).
	AnsweredToken string
	// Replayed says that the answer repeats the kept answer of an idempotency key. Set by the
	// service (createOnce).
	Replayed bool
}

type callKey struct{}

// WithCall returns a context that carries call to the service. A read that sends no token and
// asks for no primary needs none.
func WithCall(ctx context.Context, call *Call) context.Context {
	return context.WithValue(ctx, callKey{}, call)
}

// callOf returns the call that ctx carries, or nil.
func callOf(ctx context.Context) *Call {
	c, _ := ctx.Value(callKey{}).(*Call)
	return c
}
