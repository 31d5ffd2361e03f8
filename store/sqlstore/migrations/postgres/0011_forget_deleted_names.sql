-- A deleted user's name leaves the change log: its delete is kept with the id and role (a watch of
-- one role must still see the user leave it), and the user's earlier changes lose the name too.
-- The log is public to every watcher for store.EventTTL (24 hours); a name the user had deleted
-- should not be readable there all that time. The function is 0009's with the DELETE branch changed.
CREATE INDEX user_events_user_id ON user_events (user_id);

CREATE OR REPLACE FUNCTION users_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(111559182283891);
    IF TG_OP = 'DELETE' THEN
        UPDATE user_events SET name = '' WHERE user_id = OLD.id AND name <> '';
        INSERT INTO user_events (kind, user_id, name, role, previous_role, created_at, updated_at, version, at)
        VALUES (3, OLD.id, '', OLD.role, '', OLD.created_at, OLD.updated_at, OLD.version,
                (extract(epoch FROM clock_timestamp()) * 1000000)::BIGINT);
    ELSE
        INSERT INTO user_events (kind, user_id, name, role, previous_role, created_at, updated_at, version, at)
        VALUES (CASE TG_OP WHEN 'INSERT' THEN 1 ELSE 2 END, NEW.id, NEW.name, NEW.role,
                CASE TG_OP WHEN 'INSERT' THEN '' ELSE OLD.role END,
                NEW.created_at, NEW.updated_at, NEW.version,
                (extract(epoch FROM clock_timestamp()) * 1000000)::BIGINT);
    END IF;
    PERFORM pg_notify('usersd_user_events', TG_TABLE_SCHEMA);
    RETURN NULL;
END;
$$;
