package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"usersd/store"
)

var _ store.Webhooks = (*Store)(nil)

// webhookColumns are a subscription's columns, in the order scanWebhook reads them.
const webhookColumns = `id, url, types, role, enabled, disabled_reason, secret, previous_secret,
	previous_secret_until, delivered, failed_attempts, failing_since, next_attempt, generation, replays, created_at, updated_at`

// recentDeliveries is how many attempts of each subscription are kept: WebhookDeliveries answers
// no more, and older ones are dropped (see trimEvery).
const recentDeliveries = 100

func scanWebhook(row scanner) (store.Webhook, error) {
	var w store.Webhook
	var types string
	var previousUntil, failingSince, nextAttempt, created, updated int64
	err := row.Scan(&w.ID, &w.URL, &types, &w.Role, &w.Enabled, &w.DisabledReason, &w.Secret, &w.PreviousSecret,
		&previousUntil, &w.Delivered, &w.FailedAttempts, &failingSince, &nextAttempt, &w.Generation, &w.Replays, &created, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return w, store.ErrNotFound
	}
	if err != nil {
		return w, err
	}
	w.Types = strings.Fields(types)
	w.PreviousSecretUntil, w.FailingSince, w.NextAttempt = timeOrZero(previousUntil), timeOrZero(failingSince), timeOrZero(nextAttempt)
	w.Created, w.Updated = fromMicros(created), fromMicros(updated)
	return w, nil
}

// timeOrZero is fromMicros, with 0 read as no time at all.
func timeOrZero(us int64) time.Time {
	if us == 0 {
		return time.Time{}
	}
	return fromMicros(us)
}

// microsOrZero is micros, with no time at all written as 0.
func microsOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return micros(t)
}

// CreateWebhook keeps a subscription, to be sent the changes after the newest one logged now.
func (s *Store) CreateWebhook(ctx context.Context, w store.Webhook) (_ store.Webhook, err error) {
	if err := s.refuseWrite(); err != nil {
		return store.Webhook{}, err
	}
	defer s.classifyWrite(ctx, &err)
	now := micros(s.now())
	var created store.Webhook
	err = inTx(ctx, s.writer, nil, func(tx *sql.Tx) error {
		var latest int64
		if err := tx.QueryRowContext(ctx, latestSequenceQuery).Scan(&latest); err != nil {
			return err
		}
		created, err = scanWebhook(tx.QueryRowContext(ctx, `INSERT INTO webhooks (url, types, role, enabled, disabled_reason,
			secret, previous_secret, previous_secret_until, delivered, failed_attempts, failing_since, next_attempt,
			lease_owner, lease_until, generation, replays, created_at, updated_at)
			VALUES ($1, $2, $3, TRUE, '', $4, '', 0, $5, 0, 0, 0, '', 0, 1, 0, $6, $6) RETURNING `+webhookColumns,
			w.URL, strings.Join(w.Types, " "), w.Role, w.Secret, latest, now))
		return err
	})
	if err != nil {
		return store.Webhook{}, fmt.Errorf("create webhook: %w", err)
	}
	return created, nil
}

// latestSequenceQuery reads the newest sequence of the change log, or the newest swept one.
const latestSequenceQuery = `SELECT COALESCE((SELECT MAX(sequence) FROM user_events), (SELECT through FROM user_events_swept))`

// ListWebhooks returns every subscription, oldest first.
func (s *Store) ListWebhooks(ctx context.Context) (_ []store.Webhook, err error) {
	defer s.classify(ctx, &err)
	rows, err := s.writer.QueryContext(ctx, `SELECT `+webhookColumns+` FROM webhooks ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("list webhooks: %w", err)
	}
	defer rows.Close()
	var out []store.Webhook
	for rows.Next() {
		w, err := scanWebhook(rows)
		if err != nil {
			return nil, fmt.Errorf("list webhooks: %w", err)
		}
		out = append(out, w)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list webhooks: %w", err)
	}
	return out, nil
}

// GetWebhook returns a subscription, read on the primary: a subscription is read to be changed.
func (s *Store) GetWebhook(ctx context.Context, id int32) (_ store.Webhook, err error) {
	defer s.classify(ctx, &err)
	return scanWebhook(s.queryRowOnWriter(ctx, `SELECT `+webhookColumns+` FROM webhooks WHERE id = $1`, id))
}

// UpdateWebhook sets what changes names, and moves the generation on.
func (s *Store) UpdateWebhook(ctx context.Context, id int32, changes store.WebhookChanges) (_ store.Webhook, err error) {
	sets := []string{"generation = generation + 1", "updated_at = $2"}
	args := []any{id, micros(s.now())}
	set := func(column string, value any) {
		args = append(args, value)
		sets = append(sets, fmt.Sprintf("%s = %s", column, placeholder(len(args))))
	}
	if changes.URL != nil {
		set("url", *changes.URL)
	}
	if changes.Types != nil {
		set("types", strings.Join(*changes.Types, " "))
	}
	if changes.Role != nil {
		set("role", *changes.Role)
	}
	if changes.Enabled != nil {
		set("enabled", *changes.Enabled)
		if *changes.Enabled { // a fresh start: no failures, no reason
			sets = append(sets, "disabled_reason = ''", "failed_attempts = 0", "failing_since = 0", "next_attempt = 0")
		}
	}
	return s.changeWebhook(ctx, "update webhook", `UPDATE webhooks SET `+strings.Join(sets, ", ")+` WHERE id = $1 RETURNING `+webhookColumns, args...)
}

// changeWebhook runs one statement that changes a subscription and returns it.
func (s *Store) changeWebhook(ctx context.Context, what, statement string, args ...any) (_ store.Webhook, err error) {
	if err := s.refuseWrite(); err != nil {
		return store.Webhook{}, err
	}
	defer s.classifyWrite(ctx, &err)
	w, err := scanWebhook(s.writer.QueryRowContext(ctx, statement, args...))
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return store.Webhook{}, fmt.Errorf("%s: %w", what, err)
	}
	return w, err
}

// DeleteWebhook removes a subscription and, by its foreign key, its recent deliveries.
func (s *Store) DeleteWebhook(ctx context.Context, id int32) (err error) {
	if err := s.refuseWrite(); err != nil {
		return err
	}
	defer s.classifyWrite(ctx, &err)
	res, err := s.writer.ExecContext(ctx, `DELETE FROM webhooks WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("delete webhook: %w", err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return store.ErrNotFound
	}
	s.webhookTrims.forget(id)
	return nil
}

// RotateWebhookSecret makes secret the subscription's secret, keeping the one it replaces until
// previousUntil.
func (s *Store) RotateWebhookSecret(ctx context.Context, id int32, secret string, previousUntil time.Time) (store.Webhook, error) {
	return s.changeWebhook(ctx, "rotate webhook secret", `UPDATE webhooks SET previous_secret = secret, previous_secret_until = $3,
		secret = $2, generation = generation + 1, updated_at = $4 WHERE id = $1 RETURNING `+webhookColumns,
		id, secret, micros(previousUntil), micros(s.now()))
}

// ReplayWebhook moves the subscription back to after, if the log still holds every change after it.
func (s *Store) ReplayWebhook(ctx context.Context, id int32, after int64) (_ store.Webhook, err error) {
	if err := s.refuseWrite(); err != nil {
		return store.Webhook{}, err
	}
	defer s.classifyWrite(ctx, &err)
	var w store.Webhook
	err = inTx(ctx, s.writer, nil, func(tx *sql.Tx) error {
		var swept int64
		if err := tx.QueryRowContext(ctx, `SELECT through FROM user_events_swept`).Scan(&swept); err != nil {
			return err
		}
		if after < swept {
			return store.ErrEventsSwept
		}
		w, err = scanWebhook(tx.QueryRowContext(ctx, `UPDATE webhooks SET delivered = $2, failed_attempts = 0, failing_since = 0,
			next_attempt = 0, generation = generation + 1, replays = replays + 1, updated_at = $3 WHERE id = $1 RETURNING `+webhookColumns,
			id, after, micros(s.now())))
		return err
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrEventsSwept) {
		return store.Webhook{}, fmt.Errorf("replay webhook: %w", err)
	}
	return w, err
}

// WebhookDeliveries returns the subscription's most recent attempts, newest first.
func (s *Store) WebhookDeliveries(ctx context.Context, id int32, limit int) (_ []store.WebhookAttempt, err error) {
	defer s.classify(ctx, &err)
	rows, err := s.writer.QueryContext(ctx, `SELECT sequence, status, latency_us, error, at, next_attempt
		FROM webhook_deliveries WHERE webhook_id = $1 ORDER BY attempt DESC LIMIT $2`, id, min(limit, recentDeliveries))
	if err != nil {
		return nil, fmt.Errorf("list webhook deliveries: %w", err)
	}
	defer rows.Close()
	var out []store.WebhookAttempt
	for rows.Next() {
		var a store.WebhookAttempt
		var latency, at, next int64
		if err := rows.Scan(&a.Sequence, &a.Status, &latency, &a.Error, &at, &next); err != nil {
			return nil, fmt.Errorf("list webhook deliveries: %w", err)
		}
		a.Latency, a.At, a.NextAttempt = time.Duration(latency)*time.Microsecond, fromMicros(at), timeOrZero(next)
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list webhook deliveries: %w", err)
	}
	return out, nil
}

// LeaseWebhooks takes or renews owner's leases, by the database's clock where processes share it.
func (s *Store) LeaseWebhooks(ctx context.Context, owner string, ttl time.Duration) (_ []store.Webhook, err error) {
	if err := s.refuseWrite(); err != nil {
		return nil, err
	}
	defer s.classifyWrite(ctx, &err)
	var held []store.Webhook
	err = inTx(ctx, s.writer, nil, func(tx *sql.Tx) error {
		now, err := s.databaseNow(ctx, tx)
		if err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, `UPDATE webhooks SET lease_owner = $1, lease_until = $2
			WHERE enabled AND (lease_owner = $1 OR lease_until < $3) RETURNING `+webhookColumns,
			owner, now+ttl.Microseconds(), now)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			w, err := scanWebhook(rows)
			if err != nil {
				return err
			}
			held = append(held, w)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("lease webhooks: %w", err)
	}
	return held, nil
}

// databaseNow is the time that leases are measured by: on PostgreSQL the server's clock, which every
// replica shares; on SQLite, which one process writes, this process's.
func (s *Store) databaseNow(ctx context.Context, tx *sql.Tx) (int64, error) {
	if s.dialect != &postgresDialect {
		return micros(s.now()), nil
	}
	var now int64
	err := tx.QueryRowContext(ctx, `SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::BIGINT`).Scan(&now)
	return now, err
}

// ReleaseWebhooks gives up owner's leases.
func (s *Store) ReleaseWebhooks(ctx context.Context, owner string) (err error) {
	if err := s.refuseWrite(); err != nil {
		return err
	}
	defer s.classifyWrite(ctx, &err)
	if _, err := s.writer.ExecContext(ctx, `UPDATE webhooks SET lease_owner = '', lease_until = 0 WHERE lease_owner = $1`, owner); err != nil {
		return fmt.Errorf("release webhooks: %w", err)
	}
	return nil
}

// RecordWebhookAttempt applies an attempt's outcome, if owner holds the lease and the position is
// still held's.
func (s *Store) RecordWebhookAttempt(ctx context.Context, owner string, held store.Webhook, a store.WebhookAttempt, o store.WebhookOutcome) (_ store.Webhook, err error) {
	var w store.Webhook
	trim := o.Record && s.webhookTrims.due(held.ID) // decided once, however often the write is tried
	// A deliverer waits for its record before its next attempt, so that a kill resends at most the
	// change under way: the records of many subscriptions (and the users' writes) share commits.
	err = s.write(ctx, 0, func(ctx context.Context, tx writeTx) error {
		now, err := s.databaseNow(ctx, tx.Tx)
		if err != nil {
			return err
		}
		var statement string
		args := []any{held.ID, owner, held.Delivered, now}
		switch {
		case o.Delivered:
			statement = `UPDATE webhooks SET delivered = $5, failed_attempts = 0, failing_since = 0, next_attempt = 0`
			args = append(args, a.Sequence)
		default:
			statement = `UPDATE webhooks SET failed_attempts = failed_attempts + 1,
				failing_since = CASE WHEN failing_since = 0 THEN $5 ELSE failing_since END, next_attempt = $6`
			args = append(args, micros(a.At), microsOrZero(a.NextAttempt))
		}
		if o.Disable != "" {
			args = append(args, o.Disable)
			statement += `, enabled = FALSE, disabled_reason = ` + placeholder(len(args)) + `, lease_owner = '', lease_until = 0`
		}
		w, err = scanWebhook(tx.QueryRowContext(ctx, statement+` WHERE id = $1 AND lease_owner = $2 AND delivered = $3
			AND lease_until >= $4 RETURNING `+webhookColumns, args...))
		if errors.Is(err, store.ErrNotFound) {
			return store.ErrLeaseLost
		}
		if err != nil || !o.Record {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO webhook_deliveries (webhook_id, sequence, status, latency_us, error, at, next_attempt)
			VALUES ($1, $2, $3, $4, $5, $6, $7)`, held.ID, a.Sequence, a.Status, a.Latency.Microseconds(), a.Error,
			micros(a.At), microsOrZero(a.NextAttempt)); err != nil || !trim {
			return err
		}
		// Only the most recent attempts are kept: what is older than the recentDeliveries-th goes.
		_, err = tx.ExecContext(ctx, `DELETE FROM webhook_deliveries WHERE webhook_id = $1 AND attempt <= (
			SELECT attempt FROM webhook_deliveries WHERE webhook_id = $1 ORDER BY attempt DESC LIMIT 1 OFFSET $2)`,
			held.ID, recentDeliveries)
		return err
	})
	if err != nil && trim {
		s.webhookTrims.forget(held.ID)
	}
	if err != nil && !errors.Is(err, store.ErrLeaseLost) {
		return store.Webhook{}, fmt.Errorf("record webhook attempt: %w", err)
	}
	return w, err
}
