package webhooks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"usersd/store"
)

const (
	// firstRetry is the pause after a first failure; each failure after doubles it, up to maxRetry.
	firstRetry = 5 * time.Second
	maxRetry   = time.Hour
	// recordTimeout bounds the recording of an attempt, which goes on when the engine stops: a
	// delivery that is not recorded is sent again.
	recordTimeout = 5 * time.Second
)

// attempt sends one change and records how it went. It returns the subscription as the store holds
// it after, whether the change was delivered, and false when the deliverer must stop.
func (e *Engine) attempt(ctx context.Context, sub store.Webhook, ev store.UserEvent) (store.Webhook, bool, bool) {
	body, err := eventBody(e.source, ev)
	if err != nil {
		e.log.Error("webhook event not encoded", "webhook", sub.ID, "sequence", ev.Sequence, "error", err)
		return sub, false, sleep(ctx, pollEvery, nil)
	}
	at := time.Now()
	status, err := e.post(ctx, sub, ev.Sequence, at, body)
	if ctx.Err() != nil {
		return sub, false, false // stopped under way: nothing to record, the change is sent again
	}
	a := store.WebhookAttempt{Sequence: ev.Sequence, Status: int32(status), Latency: time.Since(at), At: at}
	o := store.WebhookOutcome{Record: true}
	result := "delivered"
	switch {
	case err == nil && status >= 200 && status < 300:
		o.Delivered = true
	case err == nil && status == http.StatusGone:
		a.Error, result = "the receiver answered 410 Gone", "gone"
		o.Disable = "the receiver answered 410 Gone"
	default:
		a.Error, result = failure(status, err), "failed"
		if errors.Is(err, errRefusedAddress) {
			result = "refused"
		}
		since := sub.FailingSince
		if since.IsZero() {
			since = at
		}
		if at.Sub(since) >= giveUpAfter {
			o.Disable = "its deliveries failed for 72 hours"
		} else {
			a.NextAttempt = at.Add(retryAfter(sub.FailedAttempts + 1))
		}
	}
	e.metrics.attempted(result, a.Latency)
	next, err := e.record(ctx, sub, a, o)
	if err != nil {
		return sub, false, e.keepGoing(ctx, sub, err)
	}
	return next, o.Delivered, o.Disable == ""
}

// record records an attempt, even while the engine stops (so that a delivery is not sent again).
func (e *Engine) record(ctx context.Context, sub store.Webhook, a store.WebhookAttempt, o store.WebhookOutcome) (store.Webhook, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	return e.store.RecordWebhookAttempt(ctx, e.owner, sub, a, o)
}

// post sends body to the subscription's URL, signed, and returns the receiver's status.
func (e *Engine) post(ctx context.Context, sub store.Webhook, sequence int64, at time.Time, body []byte) (int, error) {
	id := formatSequence(sequence)
	secrets := []string{sub.Secret}
	if sub.PreviousSecret != "" && at.Before(sub.PreviousSecretUntil) {
		secrets = append(secrets, sub.PreviousSecret)
	}
	signed, err := signature(id, at, body, secrets...)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, sub.URL, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/cloudevents+json; charset=utf-8")
	req.Header.Set("User-Agent", "usersd-webhooks")
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(at.Unix(), 10))
	req.Header.Set("webhook-signature", signed)
	res, err := e.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	// Only the status counts; what the receiver says beyond answerLimit is not read (closing the
	// body then drops the connection rather than drain it).
	io.Copy(io.Discard, io.LimitReader(res.Body, answerLimit))
	return res.StatusCode, nil
}

// failure says why an attempt failed, without the URL (a receiver's URL may carry a token of its
// own in its query).
func failure(status int, err error) string {
	if err == nil {
		return fmt.Sprintf("the receiver answered %d %s", status, http.StatusText(status))
	}
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		err = urlErr.Err
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "no answer within 10 s"
	}
	return err.Error()
}

// retryAfter is the pause before attempt n (from 1, the first retry): exponential, with jitter
// over its upper half, so that subscriptions that failed together do not retry together.
func retryAfter(n int32) time.Duration {
	d := firstRetry
	for i := int32(1); i < n && d < maxRetry; i++ {
		d *= 2
	}
	d = min(d, maxRetry)
	return d/2 + rand.N(d/2+1)
}

func formatSequence(sequence int64) string { return strconv.FormatInt(sequence, 10) }
