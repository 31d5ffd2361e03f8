// The deadline of what a request does beside its own work: the work that must go on if its client
// has gone, but must not hold its answer past its deadline.
package users

import "context"

// withinDeadline returns a context for the work a request does after its own has failed or that
// its answer needs (giving a key back, reading a write's position): it goes on if the client has
// gone, but ends at the request's deadline, when the request is answered whatever the database
// does.
func withinDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	detached := context.WithoutCancel(ctx)
	if deadline, ok := ctx.Deadline(); ok {
		return context.WithDeadline(detached, deadline)
	}
	return detached, func() {}
}
