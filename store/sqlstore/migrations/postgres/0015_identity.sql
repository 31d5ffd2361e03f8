-- The identity of a user (the proto's User fields 7 to 13): a user name, given and family names, an
-- email, the provisioning system's id, whether the user is active, and labels (a JSON object of
-- strings, as text). user_name_key and email_key are store.NameKey of their values, computed in Go
-- like name_key, so that the unique indexes compare ignoring case the same way on every backend.
-- Adding columns with constant defaults rewrites no row and holds the table's lock only for a
-- moment; a replica of the previous release names its columns and never reads these. The unique
-- indexes are built in 0016, without a transaction, so that writes go on while they build. The
-- change log keeps the same fields; the function is 0014's with them added, and a delete forgets
-- them with the name.
ALTER TABLE users
    ADD COLUMN user_name     TEXT COLLATE "C" NOT NULL DEFAULT '',
    ADD COLUMN user_name_key TEXT COLLATE "C" NOT NULL DEFAULT '',
    ADD COLUMN given_name    TEXT COLLATE "C" NOT NULL DEFAULT '',
    ADD COLUMN family_name   TEXT COLLATE "C" NOT NULL DEFAULT '',
    ADD COLUMN email         TEXT COLLATE "C" NOT NULL DEFAULT '',
    ADD COLUMN email_key     TEXT COLLATE "C" NOT NULL DEFAULT '',
    ADD COLUMN external_id   TEXT COLLATE "C" NOT NULL DEFAULT '',
    ADD COLUMN active        BOOLEAN NOT NULL DEFAULT TRUE,
    ADD COLUMN labels        TEXT COLLATE "C" NOT NULL DEFAULT '{}';

ALTER TABLE user_events
    ADD COLUMN user_name   TEXT COLLATE "C" NOT NULL DEFAULT '',
    ADD COLUMN given_name  TEXT COLLATE "C" NOT NULL DEFAULT '',
    ADD COLUMN family_name TEXT COLLATE "C" NOT NULL DEFAULT '',
    ADD COLUMN email       TEXT COLLATE "C" NOT NULL DEFAULT '',
    ADD COLUMN external_id TEXT COLLATE "C" NOT NULL DEFAULT '',
    ADD COLUMN active      BOOLEAN NOT NULL DEFAULT TRUE,
    ADD COLUMN labels      TEXT COLLATE "C" NOT NULL DEFAULT '{}';

CREATE OR REPLACE FUNCTION users_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(111559182283891);
    IF TG_OP = 'DELETE' THEN
        UPDATE user_events SET name = '', user_name = '', given_name = '', family_name = '', email = '', external_id = '', labels = '{}'
        WHERE user_id = OLD.id AND name <> '';
        INSERT INTO user_events (kind, user_id, name, role, previous_role, created_at, updated_at, version, at, actor, actor_type)
        VALUES (3, OLD.id, '', OLD.role, '', OLD.created_at, OLD.updated_at, OLD.version,
                (extract(epoch FROM clock_timestamp()) * 1000000)::BIGINT, OLD.changed_by, OLD.changed_by_type);
    ELSE
        INSERT INTO user_events (kind, user_id, name, role, previous_role, created_at, updated_at, version, at, actor, actor_type,
                                 user_name, given_name, family_name, email, external_id, active, labels)
        VALUES (CASE TG_OP WHEN 'INSERT' THEN 1 ELSE 2 END, NEW.id, NEW.name, NEW.role,
                CASE TG_OP WHEN 'INSERT' THEN '' ELSE OLD.role END,
                NEW.created_at, NEW.updated_at, NEW.version,
                (extract(epoch FROM clock_timestamp()) * 1000000)::BIGINT, NEW.changed_by, NEW.changed_by_type,
                NEW.user_name, NEW.given_name, NEW.family_name, NEW.email, NEW.external_id, NEW.active, NEW.labels);
    END IF;
    PERFORM pg_notify('usersd_user_events', TG_TABLE_SCHEMA);
    RETURN NULL;
END;
$$;
