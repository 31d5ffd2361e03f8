-- The answers of idempotent requests (docs/API.md#safe-retries-and-concurrent-edits), keyed by the caller (a digest of the API
-- key) and the key the caller chose. status and response are NULL while the request runs. Kept in
-- the database, so every replica sees every key.
CREATE TABLE idempotency_keys (
    caller       TEXT    NOT NULL,
    key          TEXT    NOT NULL,
    request_hash BYTEA   NOT NULL,
    -- Tells the request that holds the key from one that took it over after the lease ran out.
    token        TEXT    NOT NULL,
    started_at   BIGINT  NOT NULL,
    status       INTEGER,
    response     BYTEA,
    PRIMARY KEY (caller, key)
);

-- For the sweeper that deletes expired records.
CREATE INDEX idempotency_keys_started_at ON idempotency_keys (started_at);
