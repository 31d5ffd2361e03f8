// Read your writes (docs/POSTGRESQL.md#read-replicas): every successful write answers a
// Consistency-Token, and a read that sends one back sees that write and every write before it,
// wherever the store serves it. Reads without one may be served by a standby within its lag.
package users

import (
	"context"
	"strconv"
	"strings"

	"usersd/store"
)

// ConsistencyTokenHeader carries the token, on REST as a header and on RPC as metadata.
const ConsistencyTokenHeader = "Consistency-Token"

// tokenPrefix starts every token and names its version, so that a later form can be told apart.
const tokenPrefix = "c1-"

// consistencyOf returns what the call in ctx says of its reads' freshness: nothing outside a call.
func consistencyOf(ctx context.Context) (token string, primary bool) {
	if c := callOf(ctx); c != nil {
		return c.ConsistencyToken, c.Primary
	}
	return "", false
}

// forRead returns ctx with the freshness its reads require, or invalid_argument for a token this
// service did not issue.
func forRead(ctx context.Context) (context.Context, error) {
	token, primary := consistencyOf(ctx)
	if token == "" && !primary {
		return ctx, nil
	}
	f := store.Freshness{Primary: primary}
	if token != "" {
		position, err := parseConsistencyToken(token)
		if err != nil {
			return ctx, err
		}
		// A token without a position was issued where no standby serves reads: only the primary
		// is sure to hold its write.
		f.After, f.Primary = position, f.Primary || position == 0
	}
	return store.WithFreshness(ctx, f), nil
}

// forWrite returns ctx for a write: whatever it reads (a precondition) it reads on the primary,
// and what it changes the change log records as the caller's. A token the request sent is checked,
// so that a malformed one is refused wherever it is sent, but asks for nothing: a write sees every
// write before it.
func forWrite(ctx context.Context) (context.Context, error) {
	if err := checkConsistencyToken(ctx); err != nil {
		return ctx, err
	}
	if caller, ok := CallerOf(ctx); ok {
		ctx = store.WithActor(ctx, caller.actor())
	}
	return store.WithFreshness(ctx, store.Freshness{Primary: true}), nil
}

// checkConsistencyToken refuses a token this service did not issue, for a request that has no use
// for a valid one: a write, which sees every write before it, and a watch, which reads the change
// log on the primary. A malformed token is a client's mistake wherever it is sent, and is said so.
func checkConsistencyToken(ctx context.Context) error {
	if token, _ := consistencyOf(ctx); token != "" {
		if _, err := parseConsistencyToken(token); err != nil {
			return err
		}
	}
	return nil
}

// answerToken gives the caller of a write that succeeded the token that reads of it send back,
// in the call's AnsweredToken; outside a call, nobody takes it. The write is done whatever happens
// here: if the primary cannot say its position by the request's deadline, the token holds none,
// which sends the reads that carry it to the primary, and the write is answered at its deadline.
func (s *Service) answerToken(ctx context.Context) {
	call := callOf(ctx)
	if call == nil {
		return
	}
	positionCtx, cancel := withinDeadline(ctx)
	defer cancel()
	position, err := s.store.Position(positionCtx)
	if err != nil {
		s.logger.WarnContext(ctx, "a write's consistency token holds no position: its reads go to the primary", "error", err)
		position = 0
	}
	call.AnsweredToken = tokenPrefix + strconv.FormatUint(uint64(position), 16)
}

// parseConsistencyToken reads a token that answerToken made.
func parseConsistencyToken(token string) (store.Position, error) {
	digits, ok := strings.CutPrefix(token, tokenPrefix)
	position, err := strconv.ParseUint(digits, 16, 64)
	if !ok || err != nil {
		return 0, InvalidField(ConsistencyTokenHeader, "%s %.40q is not one that this service issued: send back the token of a write as it was answered",
			ConsistencyTokenHeader, token)
	}
	return store.Position(position), nil
}
