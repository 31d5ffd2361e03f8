-- The filter of lists (store.Filter, filter.go). A filter on a label reads the side table
-- user_labels: one row per label of each user, copied from users.labels (a JSON object, as text)
-- by the trigger below in the write's own transaction, and indexed by (key, value, user_id), so
-- that the users with a label, or with a label of one value, are one range of that index.
-- users.labels stays what reads return; the side table is only ever searched. A user's rows go with
-- it (ON DELETE CASCADE), and a user with no labels has none.
--
-- This transaction only creates: the table is new and empty, so its indexes build at once, and the
-- triggers hold users' lock for a moment. The labels of the users there are already are copied by
-- 0020's Go step, in short batches after this commits: from then on the triggers keep every write's
-- labels, and the batches lock only the rows they copy.
CREATE TABLE user_labels (
    user_id INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    key     TEXT COLLATE "C" NOT NULL,
    value   TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (user_id, key)
);
CREATE INDEX user_labels_key_value ON user_labels (key, value, user_id);

-- An update replaces the user's rows: labels are few (store.MaxLabels) and their changes rare.
CREATE FUNCTION users_labels() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        DELETE FROM user_labels WHERE user_id = NEW.id;
    END IF;
    INSERT INTO user_labels (user_id, key, value) SELECT NEW.id, j.key, j.value FROM jsonb_each_text(NEW.labels::jsonb) AS j;
    RETURN NULL;
END;
$$;

CREATE TRIGGER users_labels_insert AFTER INSERT ON users
    FOR EACH ROW WHEN (NEW.labels <> '{}') EXECUTE FUNCTION users_labels();
CREATE TRIGGER users_labels_update AFTER UPDATE OF labels ON users
    FOR EACH ROW WHEN (OLD.labels IS DISTINCT FROM NEW.labels) EXECUTE FUNCTION users_labels();
