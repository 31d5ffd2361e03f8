-- The identity of a user (the proto's User fields 7 to 13): a user name, given and family names, an
-- email, the provisioning system's id, whether the user is active, and labels (a JSON object of
-- strings). user_name_key and email_key are store.NameKey of their values, computed in Go like
-- name_key, so that the unique indexes compare ignoring case the same way on every backend. The
-- indexes are partial: an empty value means none, and many users have none. Adding columns with
-- constant defaults rewrites no row, so every user of an older release reads back as it was,
-- active and with no identity. The change log keeps the same fields; the triggers are 0010's with
-- them added, and a delete forgets them with the name.
ALTER TABLE users ADD COLUMN user_name TEXT NOT NULL DEFAULT '';
ALTER TABLE users ADD COLUMN user_name_key TEXT NOT NULL DEFAULT '';
ALTER TABLE users ADD COLUMN given_name TEXT NOT NULL DEFAULT '';
ALTER TABLE users ADD COLUMN family_name TEXT NOT NULL DEFAULT '';
ALTER TABLE users ADD COLUMN email TEXT NOT NULL DEFAULT '';
ALTER TABLE users ADD COLUMN email_key TEXT NOT NULL DEFAULT '';
ALTER TABLE users ADD COLUMN external_id TEXT NOT NULL DEFAULT '';
ALTER TABLE users ADD COLUMN active INTEGER NOT NULL DEFAULT 1;
ALTER TABLE users ADD COLUMN labels TEXT NOT NULL DEFAULT '{}';

CREATE UNIQUE INDEX users_user_name_unique ON users (user_name_key) WHERE user_name_key <> '';
CREATE UNIQUE INDEX users_email_unique ON users (email_key) WHERE email_key <> '';
CREATE UNIQUE INDEX users_external_id_unique ON users (external_id) WHERE external_id <> '';

ALTER TABLE user_events ADD COLUMN user_name TEXT NOT NULL DEFAULT '';
ALTER TABLE user_events ADD COLUMN given_name TEXT NOT NULL DEFAULT '';
ALTER TABLE user_events ADD COLUMN family_name TEXT NOT NULL DEFAULT '';
ALTER TABLE user_events ADD COLUMN email TEXT NOT NULL DEFAULT '';
ALTER TABLE user_events ADD COLUMN external_id TEXT NOT NULL DEFAULT '';
ALTER TABLE user_events ADD COLUMN active INTEGER NOT NULL DEFAULT 1;
ALTER TABLE user_events ADD COLUMN labels TEXT NOT NULL DEFAULT '{}';

DROP TRIGGER users_event_insert;
CREATE TRIGGER users_event_insert AFTER INSERT ON users BEGIN
    INSERT INTO user_events (kind, user_id, name, role, previous_role, created_at, updated_at, version, at, actor, actor_type,
                             user_name, given_name, family_name, email, external_id, active, labels)
    VALUES (1, NEW.id, NEW.name, NEW.role, '', NEW.created_at, NEW.updated_at, NEW.version,
            CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER), NEW.changed_by, NEW.changed_by_type,
            NEW.user_name, NEW.given_name, NEW.family_name, NEW.email, NEW.external_id, NEW.active, NEW.labels);
END;

-- Every change of a user bumps its version; an update that does not (a maintenance migration, or
-- the delete's setting of changed_by) is not a change a client could see.
DROP TRIGGER users_event_update;
CREATE TRIGGER users_event_update AFTER UPDATE ON users WHEN NEW.version <> OLD.version BEGIN
    INSERT INTO user_events (kind, user_id, name, role, previous_role, created_at, updated_at, version, at, actor, actor_type,
                             user_name, given_name, family_name, email, external_id, active, labels)
    VALUES (2, NEW.id, NEW.name, NEW.role, OLD.role, NEW.created_at, NEW.updated_at, NEW.version,
            CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER), NEW.changed_by, NEW.changed_by_type,
            NEW.user_name, NEW.given_name, NEW.family_name, NEW.email, NEW.external_id, NEW.active, NEW.labels);
END;

DROP TRIGGER users_event_delete;
CREATE TRIGGER users_event_delete AFTER DELETE ON users BEGIN
    UPDATE user_events SET name = '', user_name = '', given_name = '', family_name = '', email = '', external_id = '', labels = '{}'
    WHERE user_id = OLD.id AND name <> '';
    INSERT INTO user_events (kind, user_id, name, role, previous_role, created_at, updated_at, version, at, actor, actor_type)
    VALUES (3, OLD.id, '', OLD.role, '', OLD.created_at, OLD.updated_at, OLD.version,
            CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER), OLD.changed_by, OLD.changed_by_type);
END;
