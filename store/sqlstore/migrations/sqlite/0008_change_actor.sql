-- Who made each change (docs/ACCESS.md#who-changed-it): the name of the API key, or the subject of the bearer
-- token, that the write was made with. A user's row keeps who changed it last, which every write
-- sets in the same statement, and the change log's triggers copy it; a delete first sets it to who
-- deletes, in the delete's transaction. The triggers are 0006's and 0007's with the actor added.
ALTER TABLE users ADD COLUMN changed_by TEXT NOT NULL DEFAULT '';
ALTER TABLE user_events ADD COLUMN actor TEXT NOT NULL DEFAULT '';

DROP TRIGGER users_event_insert;
CREATE TRIGGER users_event_insert AFTER INSERT ON users BEGIN
    INSERT INTO user_events (kind, user_id, name, role, previous_role, created_at, updated_at, version, at, actor)
    VALUES (1, NEW.id, NEW.name, NEW.role, '', NEW.created_at, NEW.updated_at, NEW.version,
            CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER), NEW.changed_by);
END;

-- Every change of a user bumps its version; an update that does not (a maintenance migration, or
-- the delete's setting of changed_by) is not a change a client could see.
DROP TRIGGER users_event_update;
CREATE TRIGGER users_event_update AFTER UPDATE ON users WHEN NEW.version <> OLD.version BEGIN
    INSERT INTO user_events (kind, user_id, name, role, previous_role, created_at, updated_at, version, at, actor)
    VALUES (2, NEW.id, NEW.name, NEW.role, OLD.role, NEW.created_at, NEW.updated_at, NEW.version,
            CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER), NEW.changed_by);
END;

DROP TRIGGER users_event_delete;
CREATE TRIGGER users_event_delete AFTER DELETE ON users BEGIN
    UPDATE user_events SET name = '' WHERE user_id = OLD.id AND name <> '';
    INSERT INTO user_events (kind, user_id, name, role, previous_role, created_at, updated_at, version, at, actor)
    VALUES (3, OLD.id, '', OLD.role, '', OLD.created_at, OLD.updated_at, OLD.version,
            CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER), OLD.changed_by);
END;
