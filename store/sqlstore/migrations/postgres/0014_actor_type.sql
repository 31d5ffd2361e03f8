-- Which kind of credential each change's actor names (docs/ACCESS.md#who-changed-it): 1 an API
-- key's name, 2 a bearer token's subject, 0 none or unknown. A key's name and a token's subject are
-- chosen by different people, so one name may be two callers. A user's row keeps the type of who
-- changed it last beside its name, which every write sets in the same statement, and the change
-- log's trigger copies both. A change logged before this migration keeps 0. Adding a column with a
-- constant default rewrites no row. The function is 0012's with the actor's type added.
ALTER TABLE users ADD COLUMN changed_by_type SMALLINT NOT NULL DEFAULT 0;
ALTER TABLE user_events ADD COLUMN actor_type SMALLINT NOT NULL DEFAULT 0;

CREATE OR REPLACE FUNCTION users_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(111559182283891);
    IF TG_OP = 'DELETE' THEN
        UPDATE user_events SET name = '' WHERE user_id = OLD.id AND name <> '';
        INSERT INTO user_events (kind, user_id, name, role, previous_role, created_at, updated_at, version, at, actor, actor_type)
        VALUES (3, OLD.id, '', OLD.role, '', OLD.created_at, OLD.updated_at, OLD.version,
                (extract(epoch FROM clock_timestamp()) * 1000000)::BIGINT, OLD.changed_by, OLD.changed_by_type);
    ELSE
        INSERT INTO user_events (kind, user_id, name, role, previous_role, created_at, updated_at, version, at, actor, actor_type)
        VALUES (CASE TG_OP WHEN 'INSERT' THEN 1 ELSE 2 END, NEW.id, NEW.name, NEW.role,
                CASE TG_OP WHEN 'INSERT' THEN '' ELSE OLD.role END,
                NEW.created_at, NEW.updated_at, NEW.version,
                (extract(epoch FROM clock_timestamp()) * 1000000)::BIGINT, NEW.changed_by, NEW.changed_by_type);
    END IF;
    PERFORM pg_notify('usersd_user_events', TG_TABLE_SCHEMA);
    RETURN NULL;
END;
$$;
