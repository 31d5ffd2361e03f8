-- Who made each change (docs/ACCESS.md#who-changed-it): the name of the API key, or the subject of the bearer
-- token, that the write was made with. A user's row keeps who changed it last, which every write
-- sets in the same statement, and the change log's trigger copies it; a delete first sets it to who
-- deletes, in the delete's transaction (an update that leaves the version alone logs nothing, see
-- 0010). Adding a column with a constant default rewrites no row. The function is 0011's with the
-- actor added.
ALTER TABLE users ADD COLUMN changed_by TEXT NOT NULL DEFAULT '';
ALTER TABLE user_events ADD COLUMN actor TEXT NOT NULL DEFAULT '';

CREATE OR REPLACE FUNCTION users_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(111559182283891);
    IF TG_OP = 'DELETE' THEN
        UPDATE user_events SET name = '' WHERE user_id = OLD.id AND name <> '';
        INSERT INTO user_events (kind, user_id, name, role, previous_role, created_at, updated_at, version, at, actor)
        VALUES (3, OLD.id, '', OLD.role, '', OLD.created_at, OLD.updated_at, OLD.version,
                (extract(epoch FROM clock_timestamp()) * 1000000)::BIGINT, OLD.changed_by);
    ELSE
        INSERT INTO user_events (kind, user_id, name, role, previous_role, created_at, updated_at, version, at, actor)
        VALUES (CASE TG_OP WHEN 'INSERT' THEN 1 ELSE 2 END, NEW.id, NEW.name, NEW.role,
                CASE TG_OP WHEN 'INSERT' THEN '' ELSE OLD.role END,
                NEW.created_at, NEW.updated_at, NEW.version,
                (extract(epoch FROM clock_timestamp()) * 1000000)::BIGINT, NEW.changed_by);
    END IF;
    PERFORM pg_notify('usersd_user_events', TG_TABLE_SCHEMA);
    RETURN NULL;
END;
$$;
