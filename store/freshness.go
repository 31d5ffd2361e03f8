// How fresh a read must be, where a store can serve reads from standbys that replay the primary's
// history behind it (docs/POSTGRESQL.md#read-replicas): a read may ask to see the writes up to a
// position, or to be served by the primary alone.
package store

import "context"

// Position is a point in the primary database's history: every write that had returned when it was
// read lies at or before it. On PostgreSQL it is a write-ahead log position (an LSN). Zero is no
// position at all: only the primary is sure to hold the writes it stands for.
type Position uint64

// Freshness is what a read requires of the database that serves it. Its zero value requires
// nothing: a store may serve the read from a standby that lags by no more than it allows.
type Freshness struct {
	// After, when not zero, is a position whose writes the read must see.
	After Position
	// Primary makes the primary serve the read: a read that a write depends on (a precondition
	// checked before it), a conditional request, or one that must see a write whose position is
	// unknown.
	Primary bool
}

type freshnessKey struct{}

// WithFreshness returns a context whose reads require f.
func WithFreshness(ctx context.Context, f Freshness) context.Context {
	return context.WithValue(ctx, freshnessKey{}, f)
}

// FreshnessOf returns what the reads in ctx require; the zero Freshness if nothing was said.
func FreshnessOf(ctx context.Context) Freshness {
	f, _ := ctx.Value(freshnessKey{}).(Freshness)
	return f
}
