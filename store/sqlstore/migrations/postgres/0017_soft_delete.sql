-- Soft delete (AIP-164): a deleted user keeps its row, with delete_time and purge_time set (Unix
-- microseconds), until it is restored or purged. Nullable columns without a default are added to
-- the catalog alone: no row is rewritten, and the table's lock is held only for a moment. A
-- replica of the previous release names its columns and never reads these (it would show a
-- deleted user as live until it is replaced). The indexes that lists and the purge need are built
-- in 0018, without a transaction, so that writes go on while they build.
ALTER TABLE users
    ADD COLUMN delete_time BIGINT,
    ADD COLUMN purge_time  BIGINT;

-- A watcher's event of a soft delete shows both times, as a read showing deleted users does.
ALTER TABLE user_events
    ADD COLUMN delete_time BIGINT,
    ADD COLUMN purge_time  BIGINT;

-- The kept counts (0007) count the users that are not deleted, under their old scopes ('all',
-- 'role:<role>'), so that the totals of every list that leaves deleted users out read as before;
-- deleted users are counted apart, under 'deleted:all' and 'deleted:role:<role>', which a list
-- showing them adds. A delete of a row counts it out of the scopes of its class; an update moves it
-- between scopes when its role or its class changes. No user is deleted yet, so the counts kept so
-- far are right under the new rules.
CREATE OR REPLACE FUNCTION users_count_delta() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    old_class TEXT := CASE WHEN TG_OP <> 'INSERT' AND OLD.delete_time IS NOT NULL THEN 'deleted:' ELSE '' END;
    new_class TEXT := CASE WHEN TG_OP <> 'DELETE' AND NEW.delete_time IS NOT NULL THEN 'deleted:' ELSE '' END;
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO user_count_deltas (scope, delta) VALUES (new_class || 'all', 1), (new_class || 'role:' || NEW.role, 1);
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO user_count_deltas (scope, delta) VALUES (old_class || 'all', -1), (old_class || 'role:' || OLD.role, -1);
    ELSE
        INSERT INTO user_count_deltas (scope, delta)
            VALUES (old_class || 'role:' || OLD.role, -1), (new_class || 'role:' || NEW.role, 1);
        IF old_class <> new_class THEN
            INSERT INTO user_count_deltas (scope, delta) VALUES (old_class || 'all', -1), (new_class || 'all', 1);
        END IF;
    END IF;
    RETURN NULL;
END;
$$;

-- One trigger for both changes, so that an update of both counts once.
DROP TRIGGER users_count_role ON users;
CREATE TRIGGER users_count_role AFTER UPDATE OF role, delete_time ON users
    FOR EACH ROW WHEN (OLD.role IS DISTINCT FROM NEW.role OR (OLD.delete_time IS NULL) <> (NEW.delete_time IS NULL))
    EXECUTE FUNCTION users_count_delta();

-- The change log: 0015's function with the kinds of soft delete (store.EventKind). An update that
-- sets delete_time is a delete (3) that keeps the name, since the user may be restored; one that
-- clears it is an undelete (4). A DELETE of a row whose delete_time is set is a purge (5), and
-- forgets the name and identity as a delete always has; a DELETE of a live row is the immediate
-- delete (3) of before. A purge of a live user (Store.PurgeUser) first sets its times without
-- bumping the version, which logs nothing, so that it too is one purge (5) and nothing else.
CREATE OR REPLACE FUNCTION users_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(111559182283891);
    IF TG_OP = 'DELETE' THEN
        UPDATE user_events SET name = '', user_name = '', given_name = '', family_name = '', email = '', external_id = '', labels = '{}'
        WHERE user_id = OLD.id AND name <> '';
        INSERT INTO user_events (kind, user_id, name, role, previous_role, created_at, updated_at, version, at, actor, actor_type,
                                 delete_time, purge_time)
        VALUES (CASE WHEN OLD.delete_time IS NULL THEN 3 ELSE 5 END, OLD.id, '', OLD.role, '', OLD.created_at, OLD.updated_at, OLD.version,
                (extract(epoch FROM clock_timestamp()) * 1000000)::BIGINT, OLD.changed_by, OLD.changed_by_type,
                OLD.delete_time, OLD.purge_time);
    ELSIF TG_OP = 'INSERT' THEN
        INSERT INTO user_events (kind, user_id, name, role, previous_role, created_at, updated_at, version, at, actor, actor_type,
                                 user_name, given_name, family_name, email, external_id, active, labels, delete_time, purge_time)
        VALUES (1, NEW.id, NEW.name, NEW.role, '', NEW.created_at, NEW.updated_at, NEW.version,
                (extract(epoch FROM clock_timestamp()) * 1000000)::BIGINT, NEW.changed_by, NEW.changed_by_type,
                NEW.user_name, NEW.given_name, NEW.family_name, NEW.email, NEW.external_id, NEW.active, NEW.labels,
                NEW.delete_time, NEW.purge_time);
    ELSE
        INSERT INTO user_events (kind, user_id, name, role, previous_role, created_at, updated_at, version, at, actor, actor_type,
                                 user_name, given_name, family_name, email, external_id, active, labels, delete_time, purge_time)
        VALUES (CASE WHEN OLD.delete_time IS NULL AND NEW.delete_time IS NOT NULL THEN 3
                     WHEN OLD.delete_time IS NOT NULL AND NEW.delete_time IS NULL THEN 4
                     ELSE 2 END,
                NEW.id, NEW.name, NEW.role,
                CASE WHEN (OLD.delete_time IS NULL) = (NEW.delete_time IS NULL) THEN OLD.role ELSE '' END,
                NEW.created_at, NEW.updated_at, NEW.version,
                (extract(epoch FROM clock_timestamp()) * 1000000)::BIGINT, NEW.changed_by, NEW.changed_by_type,
                NEW.user_name, NEW.given_name, NEW.family_name, NEW.email, NEW.external_id, NEW.active, NEW.labels,
                NEW.delete_time, NEW.purge_time);
    END IF;
    PERFORM pg_notify('usersd_user_events', TG_TABLE_SCHEMA);
    RETURN NULL;
END;
$$;
