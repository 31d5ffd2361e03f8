// Read your writes (the README's "Read replicas"): every successful write answers a
// Consistency-Token, and a read that sends one back sees that write and every write before it,
// wherever the store serves it. Reads without one may be served by a standby within its lag.
package users

import (
	"context"
	"strconv"
	"strings"

	"connectrpc.com/connect"

	"usersd/store"
)

// ConsistencyTokenHeader carries the token, on REST as a header and on RPC as metadata.
const ConsistencyTokenHeader = "Consistency-Token"

// tokenPrefix starts every token and names its version, so that a later form can be told apart.
const tokenPrefix = "c1-"

// Consistency is what a request says about the freshness of its reads, and where the token of its
// write goes, for a face that does not call the service through connect (REST). An RPC's are read
// from its metadata.
type Consistency struct {
	// Token is the Consistency-Token the request sent; "" for none.
	Token string
	// Primary makes the request's reads go to the primary: a conditional request's, whose answer
	// depends on the newest version of a user.
	Primary bool
	// Answer receives the token of a successful write; nil on a read.
	Answer func(token string)
}

type consistencyKey struct{}

// WithConsistency returns a context that carries c to the service.
func WithConsistency(ctx context.Context, c Consistency) context.Context {
	return context.WithValue(ctx, consistencyKey{}, c)
}

// consistencyOf returns what ctx says: what the face put there, or else the RPC's metadata. Reads
// ask for it on every request, so it builds no answer function (see answerOf).
func consistencyOf(ctx context.Context) Consistency {
	if c, ok := ctx.Value(consistencyKey{}).(Consistency); ok {
		return c
	}
	if info, ok := connect.CallInfoForHandlerContext(ctx); ok {
		return Consistency{Token: info.RequestHeader().Get(ConsistencyTokenHeader)}
	}
	return Consistency{}
}

// answerOf returns where the token of a write in ctx goes; nil where it goes nowhere.
func answerOf(ctx context.Context) func(token string) {
	if c, ok := ctx.Value(consistencyKey{}).(Consistency); ok {
		return c.Answer
	}
	if info, ok := connect.CallInfoForHandlerContext(ctx); ok {
		return func(token string) { info.ResponseHeader().Set(ConsistencyTokenHeader, token) }
	}
	return nil
}

// forRead returns ctx with the freshness its reads require, or invalid_argument for a token this
// service did not issue.
func forRead(ctx context.Context) (context.Context, error) {
	c := consistencyOf(ctx)
	if c.Token == "" && !c.Primary {
		return ctx, nil
	}
	f := store.Freshness{Primary: c.Primary}
	if c.Token != "" {
		position, err := parseConsistencyToken(c.Token)
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
	if token := consistencyOf(ctx).Token; token != "" {
		if _, err := parseConsistencyToken(token); err != nil {
			return ctx, err
		}
	}
	if caller, ok := CallerOf(ctx); ok {
		ctx = store.WithActor(ctx, caller.Name)
	}
	return store.WithFreshness(ctx, store.Freshness{Primary: true}), nil
}

// answerToken gives the caller of a write that succeeded the token that reads of it send back.
// The write is done whatever happens here: if the primary cannot say its position, the token
// holds none, which sends the reads that carry it to the primary.
func (s *Service) answerToken(ctx context.Context) {
	answer := answerOf(ctx)
	if answer == nil {
		return
	}
	position, err := s.store.Position(context.WithoutCancel(ctx))
	if err != nil {
		s.logger.WarnContext(ctx, "a write's consistency token holds no position: its reads go to the primary", "error", err)
		position = 0
	}
	answer(tokenPrefix + strconv.FormatUint(uint64(position), 16))
}

// parseConsistencyToken reads a token that answerToken made.
func parseConsistencyToken(token string) (store.Position, error) {
	digits, ok := strings.CutPrefix(token, tokenPrefix)
	position, err := strconv.ParseUint(digits, 16, 64)
	if !ok || err != nil {
		return 0, invalidArgument("%s %.40q is not one that this service issued: send back the token of a write as it was answered",
			ConsistencyTokenHeader, token)
	}
	return store.Position(position), nil
}
