-- A deleted user's name leaves the change log: its delete is kept with the id and role (a watch of
-- one role must still see the user leave it), and the user's earlier changes lose the name too.
-- The log is public to every watcher for store.EventTTL (24 hours); a name the user had deleted
-- should not be readable there all that time. The trigger is 0006's with that change.
CREATE INDEX user_events_user_id ON user_events (user_id);

DROP TRIGGER users_event_delete;
CREATE TRIGGER users_event_delete AFTER DELETE ON users BEGIN
    UPDATE user_events SET name = '' WHERE user_id = OLD.id AND name <> '';
    INSERT INTO user_events (kind, user_id, name, role, previous_role, created_at, updated_at, version, at)
    VALUES (3, OLD.id, '', OLD.role, '', OLD.created_at, OLD.updated_at, OLD.version,
            CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER));
END;
