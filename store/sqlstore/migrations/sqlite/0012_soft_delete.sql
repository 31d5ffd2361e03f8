-- Soft delete (AIP-164): a deleted user keeps its row, with delete_time and purge_time set (Unix
-- microseconds), until it is restored or purged. Adding nullable columns rewrites no row, so every
-- user of an older release reads back as it was: not deleted.
ALTER TABLE users ADD COLUMN delete_time INTEGER;
ALTER TABLE users ADD COLUMN purge_time INTEGER;

-- A watcher's event of a soft delete shows both times, as a read showing deleted users does.
ALTER TABLE user_events ADD COLUMN delete_time INTEGER;
ALTER TABLE user_events ADD COLUMN purge_time INTEGER;

-- Lists leave deleted users out with "delete_time IS NULL": the sort indexes of 0001 and 0005
-- still give every page its order, and skip the few deleted users (those within their retention)
-- as they go. The name search counts its matches from an index alone, which must then hold
-- delete_time too: this one replaces users_name_key_role (sqlite.go names it in its hint).
DROP INDEX users_name_key_role;
CREATE INDEX users_name_key_role_delete_time ON users (name_key, role, delete_time);
-- The purge of expired users reads the due ones, oldest first, from the deleted users alone.
CREATE INDEX users_purge_time ON users (purge_time) WHERE purge_time IS NOT NULL;

-- The kept counts (0003) count the users that are not deleted, under their old scopes ('all',
-- 'role:<role>'), so that the totals of every list that leaves deleted users out read as before;
-- deleted users are counted apart, under 'deleted:all' and 'deleted:role:<role>', which a list
-- showing them adds. The triggers keep 0003's names; no user is deleted yet, so the counts kept so
-- far are right under the new rules.
DROP TRIGGER users_count_insert;
CREATE TRIGGER users_count_insert AFTER INSERT ON users BEGIN
    INSERT INTO user_counts (scope, n)
    VALUES (CASE WHEN NEW.delete_time IS NULL THEN '' ELSE 'deleted:' END || 'all', 1),
           (CASE WHEN NEW.delete_time IS NULL THEN '' ELSE 'deleted:' END || 'role:' || NEW.role, 1)
        ON CONFLICT (scope) DO UPDATE SET n = n + 1;
END;

DROP TRIGGER users_count_delete;
CREATE TRIGGER users_count_delete AFTER DELETE ON users BEGIN
    UPDATE user_counts SET n = n - 1
    WHERE scope IN (CASE WHEN OLD.delete_time IS NULL THEN '' ELSE 'deleted:' END || 'all',
                    CASE WHEN OLD.delete_time IS NULL THEN '' ELSE 'deleted:' END || 'role:' || OLD.role);
END;

-- One trigger for a change of role and of class, so that an update of both counts once.
DROP TRIGGER users_count_role;
CREATE TRIGGER users_count_role AFTER UPDATE OF role, delete_time ON users
WHEN OLD.role <> NEW.role OR (OLD.delete_time IS NULL) <> (NEW.delete_time IS NULL) BEGIN
    UPDATE user_counts SET n = n - 1
    WHERE scope = CASE WHEN OLD.delete_time IS NULL THEN '' ELSE 'deleted:' END || 'role:' || OLD.role
       OR (scope = CASE WHEN OLD.delete_time IS NULL THEN '' ELSE 'deleted:' END || 'all'
           AND (OLD.delete_time IS NULL) <> (NEW.delete_time IS NULL));
    INSERT INTO user_counts (scope, n)
    VALUES (CASE WHEN NEW.delete_time IS NULL THEN '' ELSE 'deleted:' END || 'role:' || NEW.role, 1)
        ON CONFLICT (scope) DO UPDATE SET n = n + 1;
    INSERT INTO user_counts (scope, n)
    SELECT CASE WHEN NEW.delete_time IS NULL THEN '' ELSE 'deleted:' END || 'all', 1
    WHERE (OLD.delete_time IS NULL) <> (NEW.delete_time IS NULL)
        ON CONFLICT (scope) DO UPDATE SET n = n + 1;
END;

-- The change log: 0011's triggers with the kinds of soft delete (store.EventKind). An update that
-- sets delete_time is a delete (3) that keeps the name, since the user may be restored; one that
-- clears it is an undelete (4). A DELETE of a row whose delete_time is set is a purge (5), and
-- forgets the name and identity as a delete always has; a DELETE of a live row is the immediate
-- delete (3) of before. A purge of a live user (Store.PurgeUser) first sets its times without
-- bumping the version, which logs nothing, so that it too is one purge (5) and nothing else.
-- Inserts are logged as before: a new user is never deleted, and the new columns default to NULL.
DROP TRIGGER users_event_update;
CREATE TRIGGER users_event_update AFTER UPDATE ON users WHEN NEW.version <> OLD.version BEGIN
    INSERT INTO user_events (kind, user_id, name, role, previous_role, created_at, updated_at, version, at, actor, actor_type,
                             user_name, given_name, family_name, email, external_id, active, labels, delete_time, purge_time)
    VALUES (CASE WHEN OLD.delete_time IS NULL AND NEW.delete_time IS NOT NULL THEN 3
                 WHEN OLD.delete_time IS NOT NULL AND NEW.delete_time IS NULL THEN 4
                 ELSE 2 END,
            NEW.id, NEW.name, NEW.role,
            CASE WHEN (OLD.delete_time IS NULL) = (NEW.delete_time IS NULL) THEN OLD.role ELSE '' END,
            NEW.created_at, NEW.updated_at, NEW.version,
            CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER), NEW.changed_by, NEW.changed_by_type,
            NEW.user_name, NEW.given_name, NEW.family_name, NEW.email, NEW.external_id, NEW.active, NEW.labels,
            NEW.delete_time, NEW.purge_time);
END;

DROP TRIGGER users_event_delete;
CREATE TRIGGER users_event_delete AFTER DELETE ON users BEGIN
    UPDATE user_events SET name = '', user_name = '', given_name = '', family_name = '', email = '', external_id = '', labels = '{}'
    WHERE user_id = OLD.id AND name <> '';
    INSERT INTO user_events (kind, user_id, name, role, previous_role, created_at, updated_at, version, at, actor, actor_type,
                             delete_time, purge_time)
    VALUES (CASE WHEN OLD.delete_time IS NULL THEN 3 ELSE 5 END, OLD.id, '', OLD.role, '', OLD.created_at, OLD.updated_at, OLD.version,
            CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER), OLD.changed_by, OLD.changed_by_type,
            OLD.delete_time, OLD.purge_time);
END;
