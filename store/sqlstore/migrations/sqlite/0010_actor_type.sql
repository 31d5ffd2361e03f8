-- Which kind of credential each change's actor names (docs/ACCESS.md#who-changed-it): 1 an API
-- key's name, 2 a bearer token's subject, 0 none or unknown. A key's name and a token's subject are
-- chosen by different people, so one name may be two callers. A user's row keeps the type of who
-- changed it last beside its name, which every write sets in the same statement, and the change
-- log's triggers copy both. A change logged before this migration keeps 0. The triggers are 0008's
-- with the actor's type added.
ALTER TABLE users ADD COLUMN changed_by_type INTEGER NOT NULL DEFAULT 0;
ALTER TABLE user_events ADD COLUMN actor_type INTEGER NOT NULL DEFAULT 0;

DROP TRIGGER users_event_insert;
CREATE TRIGGER users_event_insert AFTER INSERT ON users BEGIN
    INSERT INTO user_events (kind, user_id, name, role, previous_role, created_at, updated_at, version, at, actor, actor_type)
    VALUES (1, NEW.id, NEW.name, NEW.role, '', NEW.created_at, NEW.updated_at, NEW.version,
            CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER), NEW.changed_by, NEW.changed_by_type);
END;

-- Every change of a user bumps its version; an update that does not (a maintenance migration, or
-- the delete's setting of changed_by) is not a change a client could see.
DROP TRIGGER users_event_update;
CREATE TRIGGER users_event_update AFTER UPDATE ON users WHEN NEW.version <> OLD.version BEGIN
    INSERT INTO user_events (kind, user_id, name, role, previous_role, created_at, updated_at, version, at, actor, actor_type)
    VALUES (2, NEW.id, NEW.name, NEW.role, OLD.role, NEW.created_at, NEW.updated_at, NEW.version,
            CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER), NEW.changed_by, NEW.changed_by_type);
END;

DROP TRIGGER users_event_delete;
CREATE TRIGGER users_event_delete AFTER DELETE ON users BEGIN
    UPDATE user_events SET name = '' WHERE user_id = OLD.id AND name <> '';
    INSERT INTO user_events (kind, user_id, name, role, previous_role, created_at, updated_at, version, at, actor, actor_type)
    VALUES (3, OLD.id, '', OLD.role, '', OLD.created_at, OLD.updated_at, OLD.version,
            CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER), OLD.changed_by, OLD.changed_by_type);
END;
