-- Webhook subscriptions (docs/WEBHOOKS.md): where each sends the change log, how far it has been
-- delivered, which process delivers it now (its lease, in Unix microseconds like every time here),
-- and its most recent attempts. AUTOINCREMENT: a deleted subscription's id is never given again.
CREATE TABLE webhooks (
    id                    INTEGER PRIMARY KEY AUTOINCREMENT,
    url                   TEXT NOT NULL,
    types                 TEXT NOT NULL,  -- CloudEvents types, space-separated; empty sends every one
    role                  TEXT NOT NULL,
    enabled               INTEGER NOT NULL,
    disabled_reason       TEXT NOT NULL,
    secret                TEXT NOT NULL,
    previous_secret       TEXT NOT NULL,
    previous_secret_until INTEGER NOT NULL,
    delivered             INTEGER NOT NULL, -- every change up to this sequence is delivered or passed over
    failed_attempts       INTEGER NOT NULL,
    failing_since         INTEGER NOT NULL,
    next_attempt          INTEGER NOT NULL,
    lease_owner           TEXT NOT NULL,
    lease_until           INTEGER NOT NULL,
    generation            INTEGER NOT NULL, -- grows with every change a caller makes
    replays               INTEGER NOT NULL, -- grows with every replay, which moves delivered back
    created_at            INTEGER NOT NULL,
    updated_at            INTEGER NOT NULL
);

CREATE TABLE webhook_deliveries (
    attempt      INTEGER PRIMARY KEY AUTOINCREMENT,
    webhook_id   INTEGER NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    sequence     INTEGER NOT NULL,
    status       INTEGER NOT NULL,
    latency_us   INTEGER NOT NULL,
    error        TEXT NOT NULL,
    at           INTEGER NOT NULL,
    next_attempt INTEGER NOT NULL
);
CREATE INDEX webhook_deliveries_by_webhook ON webhook_deliveries (webhook_id, attempt);
