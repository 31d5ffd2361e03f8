-- A batch create (batch_users.go) inserts up to 500 users in one statement, and the triggers of an
-- insert ran once per user, each a function call and statements of its own: about half the time
-- of such an INSERT (docs/PERFORMANCE-LOG.md, 2026-11-27, the insert triggers per statement). The
-- insert triggers of the kept counts (0021), of the filters' counts (0022) and of the label side
-- table (0019) become statement triggers: each reads the statement's users from its transition
-- table and writes in one INSERT ... SELECT what the row triggers wrote one user at a time. The
-- triggers of updates and deletes stay per row, as they were.
--
-- What they write is the same, but for the deltas of the scopes that no build or fold reads per
-- user ('role:', 'inactive', 'label:', 'labelkey:' and their 'deleted:' twins), which are summed per
-- scope: one row of +n where there were n rows of +1. Every reader and every fold, of this release
-- and of the one before, sums a scope's deltas, so the counts read the same. The deltas of 'all'
-- stay one row per user, with its id and creation time, which the fold's trigger (0021) buckets.
--
-- The change log's trigger stays per row: it is a constraint trigger deferred to the commit (0010),
-- which PostgreSQL allows only per row, and a statement trigger, run at the statement, would take
-- the log's lock there and hold every other writer from then until its transaction ends.
--
-- The swap is one transaction: dropping the row triggers waits for the writes under way and holds
-- new ones until it commits, so every insert runs either the old triggers or the new ones, never
-- both nor neither. A replica of the previous release writes the same statements as before, and
-- the new triggers keep what it writes as the old ones did.

CREATE FUNCTION users_count_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO user_count_deltas (scope, delta, user_id, created_at)
    SELECT CASE WHEN delete_time IS NULL THEN 'all' ELSE 'deleted:all' END, 1, id, created_at FROM inserted
    UNION ALL
    SELECT scope, COUNT(*)::INTEGER, NULL, NULL
    FROM (SELECT CASE WHEN delete_time IS NULL THEN '' ELSE 'deleted:' END || 'role:' || role AS scope FROM inserted) AS r
    GROUP BY scope;
    RETURN NULL;
END;
$$;

-- 0022's function, for the inserted users that its trigger's condition took: those not deleted
-- that are inactive or have a label.
CREATE FUNCTION users_filter_count_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO user_count_deltas (scope, delta)
    SELECT scope, COUNT(*)::INTEGER FROM (
        SELECT 'inactive' AS scope FROM inserted WHERE delete_time IS NULL AND NOT active
        UNION ALL
        SELECT s.scope FROM inserted AS i, jsonb_each_text(i.labels::jsonb) AS j,
            LATERAL (VALUES ('label:' || j.key || '=' || j.value), ('labelkey:' || j.key)) AS s (scope)
        WHERE i.delete_time IS NULL AND i.labels <> '{}'
    ) AS d
    GROUP BY scope;
    RETURN NULL;
END;
$$;

-- 0019's function for an insert, for the inserted users that have labels.
CREATE FUNCTION users_labels_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO user_labels (user_id, key, value)
    SELECT i.id, j.key, j.value FROM inserted AS i, jsonb_each_text(i.labels::jsonb) AS j WHERE i.labels <> '{}';
    RETURN NULL;
END;
$$;

DROP TRIGGER users_count_insert_delete ON users;
DROP TRIGGER users_filter_counts_insert ON users;
DROP TRIGGER users_labels_insert ON users;

CREATE TRIGGER users_count_delete AFTER DELETE ON users
    FOR EACH ROW EXECUTE FUNCTION users_count_delta();
CREATE TRIGGER users_count_insert AFTER INSERT ON users
    REFERENCING NEW TABLE AS inserted FOR EACH STATEMENT EXECUTE FUNCTION users_count_inserted();
CREATE TRIGGER users_filter_counts_insert AFTER INSERT ON users
    REFERENCING NEW TABLE AS inserted FOR EACH STATEMENT EXECUTE FUNCTION users_filter_count_inserted();
CREATE TRIGGER users_labels_insert AFTER INSERT ON users
    REFERENCING NEW TABLE AS inserted FOR EACH STATEMENT EXECUTE FUNCTION users_labels_inserted();
