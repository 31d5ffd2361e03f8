// Idempotency keys (docs/API.md#safe-retries-and-concurrent-edits, AIP-155): a create that carries a key runs at most once per
// caller and key, and its repeats get the first answer again, on REST and RPC alike.
package users

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"usersd/store"
)

const (
	// ReplayedHeader marks an answer that repeats a kept one, on REST and RPC alike.
	ReplayedHeader = "Idempotent-Replayed"

	// MaxRequestIDLength is the longest idempotency key, in bytes.
	MaxRequestIDLength = 255
)

// CheckRequestID checks an idempotency key (the field or header named field): up to 255 printable
// ASCII characters, the characters of a structured-field string (RFC 8941), which is what the IETF
// draft makes the Idempotency-Key header.
func CheckRequestID(field, key string) error {
	if len(key) > MaxRequestIDLength {
		return InvalidField(field, "%s is %d characters long; at most %d are allowed", field, len(key), MaxRequestIDLength)
	}
	for i := range len(key) {
		if key[i] < 0x20 || key[i] > 0x7e {
			return InvalidField(field, "%s may hold only printable ASCII characters; character %d is not", field, i+1)
		}
	}
	return nil
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
// same transaction as its insert; a repeat gets the kept answer, and its call says Replayed; a
// failed create gives the key back so that the client can retry it. respond builds the RPC's
// response, which is what is kept: REST answers with a part of it.
func createOnce[T any, R proto.Message](ctx context.Context, s *Service, clientKey string, hash []byte,
	respond func(T) R, create func(done *store.Completion[T]) (T, error)) (res R, err error) {
	if clientKey == "" {
		created, err := create(nil)
		if err != nil {
			return res, fromStore(err)
		}
		s.answerToken(ctx)
		return respond(created), nil
	}
	caller, ok := CallerOf(ctx)
	if !ok {
		return res, errors.New("an idempotent create reached the service without a caller: were its credentials checked?")
	}
	key := store.RequestKey{Caller: caller.ID, Key: clientKey}
	reservation, answer, err := s.store.BeginRequest(ctx, key, hash)
	switch {
	case errors.Is(err, store.ErrRequestInProgress):
		s.metrics.IdempotencyKeyRefused("in_progress")
	case errors.Is(err, store.ErrRequestMismatch):
		s.metrics.IdempotencyKeyRefused("reused")
	}
	if err != nil {
		if reservation.Token != "" && errors.Is(err, store.ErrUnavailable) {
			// The reservation may have been made with its answer lost: give it back too.
			s.abandon(ctx, reservation)
		}
		return res, fromStore(err)
	}
	if answer != nil {
		s.metrics.IdempotentReplay()
		res = res.ProtoReflect().Type().New().Interface().(R)
		if err := proto.Unmarshal(answer.Body, res); err != nil {
			return res, fmt.Errorf("decode the kept answer of idempotency key %q: %w", clientKey, err)
		}
		if call := callOf(ctx); call != nil {
			call.Replayed = true
		}
		s.answerToken(ctx) // the write it repeats lies before the primary's position now
		return res, nil
	}
	created, err := create(&store.Completion[T]{Reservation: reservation, Answer: func(created T) (store.Answer, error) {
		body, err := proto.Marshal(respond(created))
		return store.Answer{Body: body}, err
	}})
	if err != nil {
		// The answer of a failed create is not kept: give the key back so that a retry can run.
		s.abandon(ctx, reservation)
		return res, fromStore(err)
	}
	s.answerToken(ctx)
	return respond(created), nil
}

// abandonRetry is how often a reservation is offered back while the database cannot be reached.
const abandonRetry = 250 * time.Millisecond

// abandon gives the key of a failed create back. A create fails most often because the database
// cannot be reached, and then so does the release: it is tried again in the background until the
// database answers (a failover promotes a standby within seconds) or the reservation's lease ends
// by itself, so that a client's retry with the same key is not refused as in progress for a whole
// lease. The release removes only a reservation that is still unfinished and still the one this
// request made, so trying it again late can never undo a create that did commit.
//
// ctx is the request's. The release happens even if its client has gone, but the first try waits
// no longer than the request's deadline, which is when the request is answered: a database that
// holds the statement (a pooler paused, a lock held) must not hold the answer past it. A try that
// ran out of time is taken up again in the background.
func (s *Service) abandon(ctx context.Context, r store.Reservation) {
	detached := context.WithoutCancel(ctx)
	first, cancel := withinDeadline(ctx)
	defer cancel()
	err := s.store.AbandonRequest(first, r)
	if err == nil {
		return
	}
	if !errors.Is(err, store.ErrUnavailable) && first.Err() == nil {
		s.logger.WarnContext(ctx, "idempotency key kept until its lease ends", "error", err)
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(detached, store.RequestLease)
		defer cancel()
		for {
			select {
			case <-ctx.Done():
				s.logger.WarnContext(ctx, "idempotency key kept until its lease ends", "error", err)
				return
			case <-time.After(abandonRetry):
			}
			if err = s.store.AbandonRequest(ctx, r); err == nil || !errors.Is(err, store.ErrUnavailable) {
				if err != nil {
					s.logger.WarnContext(ctx, "idempotency key kept until its lease ends", "error", err)
				}
				return
			}
		}
	}()
}
