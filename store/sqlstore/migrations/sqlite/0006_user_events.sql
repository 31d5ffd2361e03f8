-- The change log of users (docs/API.md#watching-users): one row for every create, update and delete,
-- written by a trigger in the write's own transaction, so that the log holds a change exactly when
-- the database does. SQLite has one writer at a time, so sequences are taken and committed in the
-- same order: a reader that has read up to a sequence has read everything before it.
CREATE TABLE user_events (
    -- AUTOINCREMENT: a sequence is never handed out again, not even the newest one after a sweep.
    sequence      INTEGER PRIMARY KEY AUTOINCREMENT,
    kind          INTEGER NOT NULL, -- 1 created, 2 updated, 3 deleted (store.EventKind)
    -- The user as the write left it; for a delete, as it was.
    user_id       INTEGER NOT NULL,
    name          TEXT    NOT NULL,
    role          TEXT    NOT NULL,
    -- The role before an update, so that a watch of one role also sees a user leave it.
    previous_role TEXT    NOT NULL,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL,
    version       INTEGER NOT NULL,
    -- When the change was written, by the database's clock, in Unix microseconds: what the sweep
    -- of old changes reads.
    at            INTEGER NOT NULL
);

-- The newest sequence that a sweep has deleted: a resume from before it would miss changes.
CREATE TABLE user_events_swept (
    singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
    through   INTEGER NOT NULL
);
INSERT INTO user_events_swept (singleton, through) VALUES (1, 0);

CREATE TRIGGER users_event_insert AFTER INSERT ON users BEGIN
    INSERT INTO user_events (kind, user_id, name, role, previous_role, created_at, updated_at, version, at)
    VALUES (1, NEW.id, NEW.name, NEW.role, '', NEW.created_at, NEW.updated_at, NEW.version,
            CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER));
END;

-- Every change of a user bumps its version; an update that does not (a maintenance migration) is
-- not a change a client could see.
CREATE TRIGGER users_event_update AFTER UPDATE ON users WHEN NEW.version <> OLD.version BEGIN
    INSERT INTO user_events (kind, user_id, name, role, previous_role, created_at, updated_at, version, at)
    VALUES (2, NEW.id, NEW.name, NEW.role, OLD.role, NEW.created_at, NEW.updated_at, NEW.version,
            CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER));
END;

CREATE TRIGGER users_event_delete AFTER DELETE ON users BEGIN
    INSERT INTO user_events (kind, user_id, name, role, previous_role, created_at, updated_at, version, at)
    VALUES (3, OLD.id, OLD.name, OLD.role, '', OLD.created_at, OLD.updated_at, OLD.version,
            CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER));
END;
