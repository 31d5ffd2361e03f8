-- The change log of users (docs/API.md#watching-users): one row for every create, update and delete,
-- written by a trigger in the write's own transaction, so that the log holds a change exactly when
-- the database does, whichever replica wrote it.
CREATE TABLE user_events (
    sequence      BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind          SMALLINT NOT NULL, -- 1 created, 2 updated, 3 deleted (store.EventKind)
    -- The user as the write left it; for a delete, as it was.
    user_id       INTEGER NOT NULL,
    name          TEXT COLLATE "C" NOT NULL,
    role          TEXT COLLATE "C" NOT NULL,
    -- The role before an update, so that a watch of one role also sees a user leave it.
    previous_role TEXT COLLATE "C" NOT NULL,
    created_at    BIGINT NOT NULL,
    updated_at    BIGINT NOT NULL,
    version       BIGINT NOT NULL,
    -- When the change was written, by the database's clock, in Unix microseconds: what the sweep
    -- of old changes reads.
    at            BIGINT NOT NULL
);

-- The newest sequence that a sweep has deleted: a resume from before it would miss changes.
CREATE TABLE user_events_swept (
    singleton BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (singleton),
    through   BIGINT  NOT NULL
);
INSERT INTO user_events_swept (through) VALUES (0);

-- A reader of the log reads "every change after the last sequence I read", so a change must never
-- become visible after one with a higher sequence: sequence order must be commit order. Sequences
-- are taken when rows are inserted, and transactions commit in any order, so the trigger first
-- takes a lock held until its transaction ends ("events" in ASCII) and only then its sequence:
-- writes of users take turns from their change-log row to their commit, a few microseconds each.
-- The NOTIFY, sent at commit, wakes the watchers of every replica; the log, not the notice, is the
-- truth, so a notice that is lost only delays a watcher to its next poll.
CREATE FUNCTION users_event() RETURNS trigger LANGUAGE plpgsql AS $$
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
    PERFORM pg_notify('usersd_user_events', '');
    RETURN NULL;
END;
$$;

CREATE TRIGGER users_event_insert_delete AFTER INSERT OR DELETE ON users
    FOR EACH ROW EXECUTE FUNCTION users_event();
-- Every change of a user bumps its version; an update that does not (a maintenance migration) is
-- not a change a client could see.
CREATE TRIGGER users_event_update AFTER UPDATE ON users
    FOR EACH ROW WHEN (OLD.version IS DISTINCT FROM NEW.version) EXECUTE FUNCTION users_event();
