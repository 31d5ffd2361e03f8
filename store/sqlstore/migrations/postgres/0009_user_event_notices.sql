-- A notice of a change names the schema it was made in. Notices go to every session of the
-- database that listens, whatever its schema, so deployments in different schemas of one database
-- woke each other's watchers; each replica now keeps only its own schema's notices (listen.go).
-- The function is 0008's with that one change, in pg_notify's payload.
CREATE OR REPLACE FUNCTION users_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(111559182283891);
    IF TG_OP = 'DELETE' THEN
        INSERT INTO user_events (kind, user_id, name, role, previous_role, created_at, updated_at, version, at)
        VALUES (3, OLD.id, OLD.name, OLD.role, '', OLD.created_at, OLD.updated_at, OLD.version,
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
