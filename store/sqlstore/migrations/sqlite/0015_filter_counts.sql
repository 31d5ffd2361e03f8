-- Exact totals of the filters on active and on a label's value (count_scopes.go), kept beside the
-- other counts of 0003 and 0012 in user_counts: 'inactive' counts the users not deleted whose
-- active is false, 'label:<key>=<value>' those not deleted that have the label (a key never holds
-- "="), and 'labelkey:<key>' those not deleted that have a label of the key. The triggers keep them in each write's transaction; a user that is active and has no
-- label, as most are, runs none of them. The counts of the users there are already are added by
-- the build of the kept counts (count_buckets.go), which marks them whole: until then totals read
-- the users.

CREATE TRIGGER users_filter_counts_insert AFTER INSERT ON users
WHEN NEW.delete_time IS NULL AND (NOT NEW.active OR NEW.labels <> '{}') BEGIN
    INSERT INTO user_counts (scope, n)
    SELECT scope, 1 FROM (
        SELECT 'inactive' AS scope WHERE NOT NEW.active
        UNION ALL SELECT 'label:' || key || '=' || value FROM json_each(NEW.labels)
        UNION ALL SELECT 'labelkey:' || key FROM json_each(NEW.labels)
    ) WHERE true
    ON CONFLICT (scope) DO UPDATE SET n = n + 1;
END;

-- An upsert, not an UPDATE: while the counts of the users already there are being built, a scope's
-- row may not be there yet, and the build adds only what its snapshot saw, so a decrement that
-- found no row would be lost.
CREATE TRIGGER users_filter_counts_delete AFTER DELETE ON users
WHEN OLD.delete_time IS NULL AND (NOT OLD.active OR OLD.labels <> '{}') BEGIN
    INSERT INTO user_counts (scope, n)
    SELECT scope, -1 FROM (
        SELECT 'inactive' AS scope WHERE NOT OLD.active
        UNION ALL SELECT 'label:' || key || '=' || value FROM json_each(OLD.labels)
        UNION ALL SELECT 'labelkey:' || key FROM json_each(OLD.labels)
    ) WHERE true
    ON CONFLICT (scope) DO UPDATE SET n = n - 1;
END;

-- A change of active, of the labels or of the class (a soft delete, a restore) takes the user's
-- old counts out and puts its new ones in, once per scope.
CREATE TRIGGER users_filter_counts_update AFTER UPDATE OF active, labels, delete_time ON users
WHEN (OLD.active <> NEW.active OR OLD.labels <> NEW.labels OR (OLD.delete_time IS NULL) <> (NEW.delete_time IS NULL))
 AND ((OLD.delete_time IS NULL AND (NOT OLD.active OR OLD.labels <> '{}'))
   OR (NEW.delete_time IS NULL AND (NOT NEW.active OR NEW.labels <> '{}'))) BEGIN
    INSERT INTO user_counts (scope, n)
    SELECT scope, SUM(d) FROM (
        SELECT 'inactive' AS scope, -1 AS d WHERE OLD.delete_time IS NULL AND NOT OLD.active
        UNION ALL SELECT 'label:' || key || '=' || value, -1 FROM json_each(OLD.labels) WHERE OLD.delete_time IS NULL
        UNION ALL SELECT 'labelkey:' || key, -1 FROM json_each(OLD.labels) WHERE OLD.delete_time IS NULL
        UNION ALL SELECT 'inactive', 1 WHERE NEW.delete_time IS NULL AND NOT NEW.active
        UNION ALL SELECT 'label:' || key || '=' || value, 1 FROM json_each(NEW.labels) WHERE NEW.delete_time IS NULL
        UNION ALL SELECT 'labelkey:' || key, 1 FROM json_each(NEW.labels) WHERE NEW.delete_time IS NULL
    ) WHERE true GROUP BY scope HAVING SUM(d) <> 0
    ON CONFLICT (scope) DO UPDATE SET n = n + excluded.n;
END;

-- A database with no users yet has nothing to build: its kept counts are whole from the start, and
-- the store opens without a build (count_buckets.go). The triggers above already hold the users
-- table against writers, so no user can come between this check and the commit.
INSERT INTO user_count_buckets (kind, level, bucket, n) SELECT 0, 0, 0, 1 WHERE NOT EXISTS (SELECT 1 FROM users);
