// Idempotency records: the reservation of a key, its completion in the create's own transaction, and
// the sweep of expired records.
package sqlstore

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"usersd/store"
)

// BeginRequest reserves key for a request with hash, or reports what already holds it. Every step is
// one statement that either takes the key or does not, so two replicas (or two requests, in one
// batch or in two) racing for the same key cannot both take it.
func (s *Store) BeginRequest(ctx context.Context, key store.RequestKey, hash []byte) (_ store.Reservation, _ *store.Answer, err error) {
	// tried is the reservation of the last insert tried: on an error it is returned too, since the
	// insert may have been made and its answer lost (see store.Store).
	var tried, taken store.Reservation
	var answer *store.Answer
	err = s.write(ctx, len(key.Caller)+len(key.Key)+len(hash), func(ctx context.Context, tx writeTx) (err error) {
		tried, taken, answer, err = reserve(ctx, tx, key, hash, s.now())
		return err
	})
	switch {
	case errors.Is(err, store.ErrRequestMismatch), errors.Is(err, store.ErrRequestInProgress):
		return store.Reservation{}, nil, wrapRequestError(key, err)
	case err != nil:
		return tried, nil, wrapRequestError(key, err)
	}
	return taken, answer, nil
}

// reserve is BeginRequest's write. Each round either takes the key or finds a record that holds
// it; a record can vanish between the two (abandoned, swept) or be taken over by another request,
// hence a few rounds.
func reserve(ctx context.Context, tx writeTx, key store.RequestKey, hash []byte, now time.Time) (tried, taken store.Reservation, _ *store.Answer, _ error) {
	for range 3 {
		tried = store.Reservation{RequestKey: key, Token: rand.Text()}
		res, err := tx.ExecContext(ctx,
			`INSERT INTO idempotency_keys (caller, key, request_hash, token, started_at) VALUES ($1, $2, $3, $4, $5)
			 ON CONFLICT (caller, key) DO NOTHING`,
			key.Caller, key.Key, hash, tried.Token, micros(now))
		if ok, err := oneRowChanged(res, err); err != nil || ok {
			return tried, tried, nil, err
		}

		var held struct {
			hash      []byte
			token     string
			startedAt int64
			response  []byte
		}
		err = tx.QueryRowContext(ctx,
			`SELECT request_hash, token, started_at, response FROM idempotency_keys WHERE caller = $1 AND key = $2`,
			key.Caller, key.Key).Scan(&held.hash, &held.token, &held.startedAt, &held.response)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return tried, store.Reservation{}, nil, err
		}

		started := fromMicros(held.startedAt)
		expired := now.Sub(started) >= store.RequestTTL
		abandoned := held.response == nil && now.Sub(started) >= store.RequestLease
		if expired || abandoned {
			// Take the key over from the record that was read, and only from it.
			res, err := tx.ExecContext(ctx,
				`UPDATE idempotency_keys SET request_hash = $1, token = $2, started_at = $3, response = NULL
				 WHERE caller = $4 AND key = $5 AND token = $6`,
				hash, tried.Token, micros(now), key.Caller, key.Key, held.token)
			if ok, err := oneRowChanged(res, err); err != nil || ok {
				return tried, tried, nil, err
			}
			continue
		}
		switch {
		case !bytes.Equal(held.hash, hash):
			return store.Reservation{}, store.Reservation{}, nil, store.ErrRequestMismatch
		case held.response == nil:
			return store.Reservation{}, store.Reservation{}, nil, store.ErrRequestInProgress
		}
		return store.Reservation{}, store.Reservation{}, &store.Answer{Body: held.response}, nil
	}
	return tried, store.Reservation{}, nil, store.ErrRequestInProgress
}

// AbandonRequest deletes the reservation if this request still holds it.
func (s *Store) AbandonRequest(ctx context.Context, r store.Reservation) (err error) {
	// Not refused when the SQLite file is lost: the release only makes that file truer, should
	// the operator bring it back, where the key would otherwise read as in progress for a lease.
	defer s.classifyWrite(ctx, &err)
	_, err = s.writer.ExecContext(ctx,
		`DELETE FROM idempotency_keys WHERE caller = $1 AND key = $2 AND token = $3 AND response IS NULL`,
		r.Caller, r.Key, r.Token)
	return wrapRequestError(r.RequestKey, err)
}

// DeleteExpiredRequests deletes up to limit records that started more than RequestTTL ago.
func (s *Store) DeleteExpiredRequests(ctx context.Context, limit int) (_ int, err error) {
	if err := s.refuseWrite(); err != nil {
		return 0, err
	}
	defer s.classifyWrite(ctx, &err)
	cutoff := micros(s.now().Add(-store.RequestTTL))
	res, err := s.writer.ExecContext(ctx,
		`DELETE FROM idempotency_keys WHERE (caller, key) IN
		 (SELECT caller, key FROM idempotency_keys WHERE started_at < $1 LIMIT $2)`, cutoff, limit)
	if err != nil {
		return 0, fmt.Errorf("delete expired idempotency records: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("delete expired idempotency records: %w", err)
	}
	return int(n), nil
}

// complete records the answer of the request that done names, in the transaction of its create. If
// the request no longer holds its key (it ran past the lease and another took over), the create is
// rolled back: the other request is the one that creates.
func complete[T any](ctx context.Context, tx writeTx, done *store.Completion[T], created T) error {
	if done == nil {
		return nil
	}
	answer, err := done.Answer(created)
	if err != nil {
		return fmt.Errorf("build the answer to keep: %w", err)
	}
	if len(answer.Body) == 0 { // NULL, or empty, is a request still running: it would never end
		return errors.New("build the answer to keep: it is empty")
	}
	r := done.Reservation
	res, err := tx.ExecContext(ctx,
		`UPDATE idempotency_keys SET response = $1 WHERE caller = $2 AND key = $3 AND token = $4 AND response IS NULL`,
		answer.Body, r.Caller, r.Key, r.Token)
	held, err := oneRowChanged(res, err)
	if err == nil && !held {
		err = store.ErrRequestInProgress
	}
	return wrapRequestError(r.RequestKey, err)
}

// oneRowChanged reports whether a statement changed a row.
func oneRowChanged(res sql.Result, err error) (bool, error) {
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

func wrapRequestError(key store.RequestKey, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("idempotency key %q: %w", key.Key, err)
}
