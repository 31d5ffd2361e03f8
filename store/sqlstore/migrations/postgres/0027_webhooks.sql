-- Webhook subscriptions (docs/WEBHOOKS.md): where each sends the change log, how far it has been
-- delivered, which replica delivers it now (its lease, by the database's clock, in Unix
-- microseconds like every time here), and its most recent attempts.
CREATE TABLE webhooks (
    id                    INTEGER GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    url                   TEXT NOT NULL,
    types                 TEXT NOT NULL,  -- CloudEvents types, space-separated; empty sends every one
    role                  TEXT NOT NULL,
    enabled               BOOLEAN NOT NULL,
    disabled_reason       TEXT NOT NULL,
    secret                TEXT NOT NULL,
    previous_secret       TEXT NOT NULL,
    previous_secret_until BIGINT NOT NULL,
    delivered             BIGINT NOT NULL, -- every change up to this sequence is delivered or passed over
    failed_attempts       INTEGER NOT NULL,
    failing_since         BIGINT NOT NULL,
    next_attempt          BIGINT NOT NULL,
    lease_owner           TEXT NOT NULL,
    lease_until           BIGINT NOT NULL,
    generation            BIGINT NOT NULL, -- grows with every change a caller makes
    replays               BIGINT NOT NULL, -- grows with every replay, which moves delivered back
    created_at            BIGINT NOT NULL,
    updated_at            BIGINT NOT NULL
);

CREATE TABLE webhook_deliveries (
    webhook_id   INTEGER NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    attempt      BIGINT GENERATED ALWAYS AS IDENTITY,
    sequence     BIGINT NOT NULL,
    status       INTEGER NOT NULL,
    latency_us   BIGINT NOT NULL,
    error        TEXT NOT NULL,
    at           BIGINT NOT NULL,
    next_attempt BIGINT NOT NULL,
    PRIMARY KEY (webhook_id, attempt)
);
