-- Exact totals of wide ranges of id and created_at (count_ranges.go): the users not deleted,
-- counted per bucket of keys at several widths (kind 1: id, kind 2: created_at; level 0 the
-- finest), so that a range reads the buckets it covers and counts only the users at its two edges.
-- The row of kind 0 marks the buckets as whole: until it is there, counts read the users. The
-- buckets of the users there are already are built after this commits, by buildCountBuckets, from
-- a snapshot, without holding back writes.
--
-- This transaction only changes the catalog: a new table, two nullable columns (no row rewritten)
-- and a function replaced.
CREATE TABLE user_count_buckets (
    kind   SMALLINT NOT NULL,
    level  SMALLINT NOT NULL,
    bucket BIGINT   NOT NULL,
    n      BIGINT   NOT NULL,
    PRIMARY KEY (kind, level, bucket)
);

-- The delta rows of scope 'all' (and 'deleted:all') carry the user's id and creation time, so that
-- a write adds no row for the buckets: a fold groups them by bucket.
ALTER TABLE user_count_deltas
    ADD COLUMN user_id    INTEGER,
    ADD COLUMN created_at BIGINT;

-- 0017's function, with the user on the rows of the class's 'all'.
CREATE OR REPLACE FUNCTION users_count_delta() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    old_class TEXT := CASE WHEN TG_OP <> 'INSERT' AND OLD.delete_time IS NOT NULL THEN 'deleted:' ELSE '' END;
    new_class TEXT := CASE WHEN TG_OP <> 'DELETE' AND NEW.delete_time IS NOT NULL THEN 'deleted:' ELSE '' END;
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO user_count_deltas (scope, delta, user_id, created_at)
            VALUES (new_class || 'all', 1, NEW.id, NEW.created_at), (new_class || 'role:' || NEW.role, 1, NULL, NULL);
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO user_count_deltas (scope, delta, user_id, created_at)
            VALUES (old_class || 'all', -1, OLD.id, OLD.created_at), (old_class || 'role:' || OLD.role, -1, NULL, NULL);
    ELSE
        INSERT INTO user_count_deltas (scope, delta)
            VALUES (old_class || 'role:' || OLD.role, -1), (new_class || 'role:' || NEW.role, 1);
        IF old_class <> new_class THEN
            INSERT INTO user_count_deltas (scope, delta, user_id, created_at)
                VALUES (old_class || 'all', -1, OLD.id, OLD.created_at), (new_class || 'all', 1, NEW.id, NEW.created_at);
        END IF;
    END IF;
    RETURN NULL;
END;
$$;

-- Whatever deletes deltas (the fold of any release, a recount) moves those of 'all' into the
-- buckets in the same statement, so that kept buckets plus pending deltas stay the truth: a
-- replica of the previous release, whose fold knows nothing of buckets, keeps it too.
CREATE FUNCTION user_count_deltas_to_buckets() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO user_count_buckets (kind, level, bucket, n)
    SELECT kind, level, bucket, SUM(delta) FROM (
        SELECT 1 AS kind, l.level, f.user_id::BIGINT >> l.shift AS bucket, f.delta
        FROM folded AS f, (VALUES (0, 8), (1, 14), (2, 20)) AS l (level, shift)
        WHERE f.scope = 'all' AND f.user_id IS NOT NULL
        UNION ALL
        SELECT 2, l.level, f.created_at >> l.shift, f.delta
        FROM folded AS f, (VALUES (0, 30), (1, 36), (2, 42), (3, 48)) AS l (level, shift)
        WHERE f.scope = 'all' AND f.created_at IS NOT NULL
    ) AS d
    GROUP BY kind, level, bucket
    ORDER BY kind, level, bucket
    ON CONFLICT (kind, level, bucket) DO UPDATE SET n = user_count_buckets.n + EXCLUDED.n;
    RETURN NULL;
END;
$$;

CREATE TRIGGER user_count_deltas_folded AFTER DELETE ON user_count_deltas
    REFERENCING OLD TABLE AS folded FOR EACH STATEMENT EXECUTE FUNCTION user_count_deltas_to_buckets();
