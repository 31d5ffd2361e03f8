// Webhook subscriptions as the database keeps them: where each sends the change log, how far it has
// been delivered, which replica delivers it now, and its recent attempts.
package store

import (
	"context"
	"errors"
	"time"
)

// WebhookOwedTTL is how long the change log keeps a change that an enabled subscription has not yet
// been sent (EventTTL is how long it keeps the others). A subscription whose receiver fails is
// disabled long before (after 72 hours), and then holds nothing.
const WebhookOwedTTL = 7 * 24 * time.Hour

// ErrLeaseLost means that another replica delivers the subscription now: this one must stop.
var ErrLeaseLost = errors.New("another replica delivers this subscription now")

// Webhook is a subscription.
type Webhook struct {
	ID    int32
	URL   string
	Types []string // the CloudEvents types to send; none sends every one
	Role  string   // when set, only the changes of users that have it, or had it before
	// Enabled is whether changes are being sent; DisabledReason says why the service stopped it.
	Enabled        bool
	DisabledReason string
	// Secret signs every delivery; PreviousSecret signs them too until PreviousSecretUntil, after a
	// rotation.
	Secret              string
	PreviousSecret      string
	PreviousSecretUntil time.Time
	// Delivered is the sequence up to which every change has been delivered or passed over.
	Delivered int64
	// FailedAttempts counts the attempts since the last delivery, the first of which failed at
	// FailingSince; NextAttempt is when the next is due (zero: at once).
	FailedAttempts int32
	FailingSince   time.Time
	NextAttempt    time.Time
	Created        time.Time
	Updated        time.Time
	// Generation grows with every change a caller makes (an update, a rotation, a replay), so that a
	// deliverer holding an older copy learns of it when the lease is renewed.
	Generation int64
	// Replays grows with every replay, so that a deliverer tells a position moved back by a replay
	// from an older copy's.
	Replays int64
}

// WebhookChanges names the fields of a subscription to set; a nil field is left as it is.
type WebhookChanges struct {
	URL     *string
	Types   *[]string
	Role    *string
	Enabled *bool
}

// WebhookAttempt is one attempt to deliver one change.
type WebhookAttempt struct {
	Sequence    int64
	Status      int32 // the receiver's HTTP status; 0 when none came
	Latency     time.Duration
	Error       string // empty when delivered
	At          time.Time
	NextAttempt time.Time // zero when delivered or given up
}

// WebhookOutcome is what an attempt (or a change passed over) does to its subscription.
type WebhookOutcome struct {
	// Delivered moves the subscription past Attempt.Sequence and clears its failures. Otherwise the
	// attempt failed: the failures grow, and the next attempt is Attempt.NextAttempt.
	Delivered bool
	// Disable, with its reason, stops the subscription (a 410, or failures for too long).
	Disable string
	// Record keeps the attempt among the recent deliveries; a change passed over is not recorded.
	Record bool
}

// Webhooks is the part of a store that keeps subscriptions. A subscription is delivered by one
// process at a time: the one that holds its lease, which it renews while it delivers.
type Webhooks interface {
	// CreateWebhook keeps w (its URL, types, role and secret) and returns it as kept, enabled, with
	// Delivered at the newest change of the log: it is sent what changes from now on.
	CreateWebhook(ctx context.Context, w Webhook) (Webhook, error)
	// ListWebhooks returns every subscription, oldest first.
	ListWebhooks(ctx context.Context) ([]Webhook, error)
	// GetWebhook returns a subscription, or ErrNotFound.
	GetWebhook(ctx context.Context, id int32) (Webhook, error)
	// UpdateWebhook sets what changes names. Enabling a subscription clears its failures and why it
	// was disabled.
	UpdateWebhook(ctx context.Context, id int32, changes WebhookChanges) (Webhook, error)
	// DeleteWebhook removes a subscription and its recent deliveries.
	DeleteWebhook(ctx context.Context, id int32) error
	// RotateWebhookSecret makes secret the subscription's secret, keeping the one it replaces
	// until previousUntil.
	RotateWebhookSecret(ctx context.Context, id int32, secret string, previousUntil time.Time) (Webhook, error)
	// ReplayWebhook moves the subscription back to after, and clears its failures, so that every
	// change after after is sent again. ErrEventsSwept if the log no longer holds them all.
	ReplayWebhook(ctx context.Context, id int32, after int64) (Webhook, error)
	// WebhookDeliveries returns the subscription's most recent attempts, newest first.
	WebhookDeliveries(ctx context.Context, id int32, limit int) ([]WebhookAttempt, error)

	// LeaseWebhooks takes or renews, for owner, the lease of every enabled subscription that no other
	// owner holds unexpired, for ttl by the database's clock, and returns the subscriptions owner
	// holds now.
	LeaseWebhooks(ctx context.Context, owner string, ttl time.Duration) ([]Webhook, error)
	// ReleaseWebhooks gives up owner's leases, so that another process takes them at once.
	ReleaseWebhooks(ctx context.Context, owner string) error
	// RecordWebhookAttempt applies an attempt's outcome to held, the subscription as its deliverer
	// read it, if owner still holds its lease and its position is still held's (a replay moves
	// it); otherwise ErrLeaseLost, and nothing changes: the deliverer starts again from what the
	// store holds, if it still holds the lease. A caller's other changes (a rotated secret, a new
	// URL) do not void an attempt made before the deliverer learnt of them.
	RecordWebhookAttempt(ctx context.Context, owner string, held Webhook, a WebhookAttempt, o WebhookOutcome) (Webhook, error)
}
