-- Exact totals of the filters on active and on a label's value (count_scopes.go), kept beside the
-- other counts of 0007 and 0017, by the same deltas and folds: 'inactive' counts the users not
-- deleted whose active is false, 'label:<key>=<value>' those not deleted that have the label (a key
-- never holds "="), and 'labelkey:<key>' those not deleted that have a label of the key. A user that is active and has no label, as most are, runs none of these
-- triggers. The counts of the users there are already are added by the build of the kept counts
-- (count_buckets.go), from a snapshot after this commits, which marks them whole: until then
-- totals read the users. This transaction only creates a function and triggers.
CREATE FUNCTION users_filter_count_delta() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' AND OLD.delete_time IS NULL THEN
        INSERT INTO user_count_deltas (scope, delta)
        SELECT 'inactive', -1 WHERE NOT OLD.active
        UNION ALL SELECT 'label:' || key || '=' || value, -1 FROM jsonb_each_text(OLD.labels::jsonb)
        UNION ALL SELECT 'labelkey:' || key, -1 FROM jsonb_each_text(OLD.labels::jsonb);
    END IF;
    IF TG_OP <> 'DELETE' AND NEW.delete_time IS NULL THEN
        INSERT INTO user_count_deltas (scope, delta)
        SELECT 'inactive', 1 WHERE NOT NEW.active
        UNION ALL SELECT 'label:' || key || '=' || value, 1 FROM jsonb_each_text(NEW.labels::jsonb)
        UNION ALL SELECT 'labelkey:' || key, 1 FROM jsonb_each_text(NEW.labels::jsonb);
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER users_filter_counts_insert AFTER INSERT ON users
    FOR EACH ROW WHEN (NEW.delete_time IS NULL AND (NOT NEW.active OR NEW.labels <> '{}'))
    EXECUTE FUNCTION users_filter_count_delta();
CREATE TRIGGER users_filter_counts_delete AFTER DELETE ON users
    FOR EACH ROW WHEN (OLD.delete_time IS NULL AND (NOT OLD.active OR OLD.labels <> '{}'))
    EXECUTE FUNCTION users_filter_count_delta();
CREATE TRIGGER users_filter_counts_update AFTER UPDATE OF active, labels, delete_time ON users
    FOR EACH ROW WHEN ((OLD.active IS DISTINCT FROM NEW.active OR OLD.labels IS DISTINCT FROM NEW.labels
                        OR (OLD.delete_time IS NULL) <> (NEW.delete_time IS NULL))
                       AND ((OLD.delete_time IS NULL AND (NOT OLD.active OR OLD.labels <> '{}'))
                            OR (NEW.delete_time IS NULL AND (NOT NEW.active OR NEW.labels <> '{}'))))
    EXECUTE FUNCTION users_filter_count_delta();

-- A database with no users yet has nothing to build: its kept counts are whole from the start, and
-- the store opens without a build (count_buckets.go). The triggers above already hold the users
-- table against writers, so no user can come between this check and the commit.
INSERT INTO user_count_buckets (kind, level, bucket, n) SELECT 0, 0, 0, 1 WHERE NOT EXISTS (SELECT 1 FROM users);
