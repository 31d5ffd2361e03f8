-- Exact totals of wide ranges of id and created_at (count_ranges.go): the users not deleted,
-- counted per bucket of keys at several widths (kind 1: id, kind 2: created_at; level 0 the
-- finest), so that a range reads the buckets it covers and counts only the users at its two edges.
-- The row of kind 0 marks the buckets as whole: until it is there, counts read the users.
CREATE TABLE user_count_buckets (
    kind   INTEGER NOT NULL,
    level  INTEGER NOT NULL,
    bucket INTEGER NOT NULL,
    n      INTEGER NOT NULL,
    PRIMARY KEY (kind, level, bucket)
) WITHOUT ROWID;

-- A write appends one row here when a user comes to count or stops counting (created, deleted,
-- restored, purged), instead of updating a row per level; the store folds them into the buckets
-- about once a second (foldBucketDeltas), and a count adds those not folded yet.
CREATE TABLE user_bucket_deltas (
    seq        INTEGER PRIMARY KEY,
    user_id    INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    delta      INTEGER NOT NULL
);

CREATE TRIGGER users_bucket_insert AFTER INSERT ON users WHEN NEW.delete_time IS NULL BEGIN
    INSERT INTO user_bucket_deltas (user_id, created_at, delta) VALUES (NEW.id, NEW.created_at, 1);
END;

CREATE TRIGGER users_bucket_delete AFTER DELETE ON users WHEN OLD.delete_time IS NULL BEGIN
    INSERT INTO user_bucket_deltas (user_id, created_at, delta) VALUES (OLD.id, OLD.created_at, -1);
END;

CREATE TRIGGER users_bucket_alive AFTER UPDATE OF delete_time ON users
WHEN (OLD.delete_time IS NULL) <> (NEW.delete_time IS NULL) BEGIN
    INSERT INTO user_bucket_deltas (user_id, created_at, delta)
    VALUES (NEW.id, NEW.created_at, CASE WHEN NEW.delete_time IS NULL THEN 1 ELSE -1 END);
END;
