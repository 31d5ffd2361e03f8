// Idempotent requests: a client that repeats a create with the same idempotency key gets the first
// answer again instead of a second record (docs/API.md#safe-retries-and-concurrent-edits).
package store

import "time"

const (
	// RequestTTL is how long the answer of a completed request is kept for repeats.
	RequestTTL = 24 * time.Hour
	// RequestLease is how long a started request holds its key. A request that has held it longer
	// belongs to a process that died mid-request (requests are far shorter), so a repeat takes the
	// key over instead of waiting for ever.
	RequestLease = time.Minute
)

// RequestKey names an idempotent request: the key the client chose, within the caller that chose
// it (a digest of the caller's API key), so that two callers' keys never meet.
type RequestKey struct {
	Caller string
	Key    string
}

// Reservation is a key held by one running request. Token tells this holder from a later one that
// took the key over after the lease ran out.
type Reservation struct {
	RequestKey
	Token string
}

// Answer is what a completed request answered, kept to be answered again to its repeats: the
// encoded response of its create, never empty (a record that holds none is a request still running).
type Answer struct {
	Body []byte
}

// Completion completes a reservation in the same transaction as the create that it guards.
type Completion[T any] struct {
	Reservation Reservation
	// Answer builds the answer to keep from the created record.
	Answer func(created T) (Answer, error)
}
