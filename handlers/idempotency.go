// Idempotency keys (the README's "Safe retries and concurrent edits", AIP-155): a create that carries a key runs at most once per
// caller and key, and its repeats get the first answer again, on REST and RPC alike.
package handlers

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"usersd/store"
)

const (
	// idempotencyKeyHeader carries a REST create's key; the create RPCs have a request_id field.
	idempotencyKeyHeader = "Idempotency-Key"
	// replayedHeader marks an answer that repeats a kept one, on REST and RPC alike.
	replayedHeader = "Idempotent-Replayed"

	maxIdempotencyKeyLength = 255
)

// checkRequestID checks an idempotency key: 1 to 255 printable ASCII characters, the characters of
// a structured-field string (RFC 8941), which is what the IETF draft makes the header.
func checkRequestID(field, key string) error {
	if len(key) > maxIdempotencyKeyLength {
		return invalidArgument("%s is %d characters long; at most %d are allowed", field, len(key), maxIdempotencyKeyLength)
	}
	for i := range len(key) {
		if key[i] < 0x20 || key[i] > 0x7e {
			return invalidArgument("%s may hold only printable ASCII characters; character %d is not", field, i+1)
		}
	}
	return nil
}

// idempotencyKey reads a REST request's Idempotency-Key header: a structured-field string (quoted,
// as the IETF draft defines it) or, as most clients send it, the bare key. No header means "".
func idempotencyKey(r *http.Request) (string, error) {
	values := r.Header.Values(idempotencyKeyHeader)
	switch {
	case len(values) == 0:
		return "", nil
	case len(values) > 1:
		return "", invalidArgument("send one %s header, not %d", idempotencyKeyHeader, len(values))
	}
	key := values[0]
	if strings.HasPrefix(key, `"`) {
		unquoted, ok := unquoteStructuredString(key)
		if !ok {
			return "", invalidArgument(`%s %s is not a valid quoted string: "...", with \" and \\ the only escapes`, idempotencyKeyHeader, key)
		}
		key = unquoted
	}
	if key == "" {
		return "", invalidArgument("%s is empty", idempotencyKeyHeader)
	}
	return key, checkRequestID(idempotencyKeyHeader, key)
}

// unquoteStructuredString reads a structured-field string (RFC 8941 section 3.3.3): in quotes, with
// backslash escaping only a quote or a backslash.
func unquoteStructuredString(quoted string) (string, bool) {
	if len(quoted) < 2 || quoted[0] != '"' || quoted[len(quoted)-1] != '"' {
		return "", false
	}
	var b strings.Builder
	inner := quoted[1 : len(quoted)-1]
	for i := 0; i < len(inner); i++ {
		switch c := inner[i]; c {
		case '"':
			return "", false // an unescaped quote ends the string before its end
		case '\\':
			i++
			if i == len(inner) || inner[i] != '"' && inner[i] != '\\' {
				return "", false
			}
			b.WriteByte(inner[i])
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), true
}

// requestHash identifies a create by what it would write, so that two requests that spell the same
// JSON value differently (member order, spacing, defaults, ignored output-only fields) are the same
// request, and two that would write different things are not.
func requestHash(operation string, fields ...string) []byte {
	h := sha256.New()
	for _, f := range append([]string{operation}, fields...) {
		h.Write(binary.AppendUvarint(nil, uint64(len(f)))) // length first: ("ab","c") is not ("a","bc")
		h.Write([]byte(f))
	}
	return h.Sum(nil)
}

// createOnce runs create at most once for the caller's clientKey. Without a key it just runs
// it. With one, the first request reserves the key, and create completes the reservation in the
// same transaction as its insert; a repeat gets the kept answer (replayed is true); a failed create
// gives the key back so that the client can retry it. respond builds the RPC's response, which is
// what is kept: REST answers with a part of it.
func createOnce[T any, R proto.Message](ctx context.Context, u *Users, clientKey string, hash []byte,
	respond func(T) R, create func(done *store.Completion[T]) (T, error)) (res R, replayed bool, err error) {
	if clientKey == "" {
		created, err := create(nil)
		if err != nil {
			return res, false, fromStore(err)
		}
		return respond(created), false, nil
	}
	caller := callerOf(ctx)
	if caller == "" {
		return res, false, errors.New("an idempotent create reached the service without a caller: is it behind requireAPIKey?")
	}
	key := store.RequestKey{Caller: caller, Key: clientKey}
	reservation, answer, err := u.store.BeginRequest(ctx, key, hash)
	switch {
	case errors.Is(err, store.ErrRequestInProgress):
		u.metrics.refusedKey("idempotency_key", "in_progress")
	case errors.Is(err, store.ErrRequestMismatch):
		u.metrics.refusedKey("idempotency_key", "reused")
	}
	if err != nil {
		return res, false, fromStore(err)
	}
	if answer != nil {
		u.metrics.idempotentReplay()
		res = res.ProtoReflect().Type().New().Interface().(R)
		if err := proto.Unmarshal(answer.Body, res); err != nil {
			return res, false, fmt.Errorf("decode the kept answer of idempotency key %q: %w", clientKey, err)
		}
		return res, true, nil
	}
	created, err := create(&store.Completion[T]{Reservation: reservation, Answer: func(created T) (store.Answer, error) {
		body, err := proto.Marshal(respond(created))
		return store.Answer{Status: http.StatusCreated, Body: body}, err
	}})
	if err != nil {
		// The answer of a failed create is not kept: give the key back so that a retry can run.
		// The client's context may be gone, yet the release must still happen.
		if abandonErr := u.store.AbandonRequest(context.WithoutCancel(ctx), reservation); abandonErr != nil {
			u.logger.WarnContext(ctx, "idempotency key kept until its lease ends", "request_id", requestID(ctx), "error", abandonErr)
		}
		return res, false, fromStore(err)
	}
	return respond(created), false, nil
}

// markReplayed tells an RPC client that the answer repeats a kept one. REST adapters set the header
// themselves: they call the service directly, not through connect.
func markReplayed(ctx context.Context, replayed bool) {
	if info, ok := connect.CallInfoForHandlerContext(ctx); ok && replayed {
		info.ResponseHeader().Set(replayedHeader, "true")
	}
}
