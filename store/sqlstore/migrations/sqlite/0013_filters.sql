-- The filter of lists (store.Filter, filter.go). A filter on a label reads the side table
-- user_labels: one row per label of each user, copied from users.labels (a JSON object) by the
-- triggers below in the write's own transaction, and indexed by (key, value, user_id), so that the
-- users with a label, or with a label of one value, are one range of that index. users.labels stays
-- what reads return; the side table is only ever searched. A user's rows go with it (ON DELETE
-- CASCADE), and a user with no labels has none.
CREATE TABLE user_labels (
    user_id INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    key     TEXT    NOT NULL,
    value   TEXT    NOT NULL,
    PRIMARY KEY (user_id, key)
) WITHOUT ROWID;
CREATE INDEX user_labels_key_value ON user_labels (key, value, user_id);

CREATE TRIGGER users_labels_insert AFTER INSERT ON users WHEN NEW.labels <> '{}' BEGIN
    INSERT INTO user_labels (user_id, key, value) SELECT NEW.id, j.key, j.value FROM json_each(NEW.labels) AS j;
END;

CREATE TRIGGER users_labels_update AFTER UPDATE OF labels ON users WHEN NEW.labels <> OLD.labels BEGIN
    DELETE FROM user_labels WHERE user_id = NEW.id;
    INSERT INTO user_labels (user_id, key, value) SELECT NEW.id, j.key, j.value FROM json_each(NEW.labels) AS j;
END;

-- The labels of the users there are already. SQLite has one writer, and a migration holds it from
-- its start to its end anyway.
INSERT INTO user_labels (user_id, key, value)
SELECT u.id, j.key, j.value FROM users AS u, json_each(u.labels) AS j WHERE u.labels <> '{}';

-- The filter on active: the bound value is the first column, id the second, so that either value
-- is one range in id order. Inactive users are the rare side, which this serves; a filter that
-- keeps the active ones (most users) is served as well by walking a sort index and testing each.
CREATE INDEX users_active_id ON users (active, id);
