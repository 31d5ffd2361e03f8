-- Users and their posts. Times are Unix microseconds (UTC): the precision PostgreSQL keeps too, so
-- both backends return the same values.
CREATE TABLE users (
    -- AUTOINCREMENT: the id of a deleted user is never handed out again.
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    name       TEXT    NOT NULL,
    role       TEXT    NOT NULL DEFAULT '',
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    -- Grows by one on every write; the entity tag is derived from it.
    version    INTEGER NOT NULL DEFAULT 1
);

-- One index per sortable attribute, with id as the tie-break, and one for the role filter.
CREATE INDEX users_name_id ON users (name, id);
CREATE INDEX users_role_id ON users (role, id);
CREATE INDEX users_created_at_id ON users (created_at, id);

CREATE TABLE posts (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id    INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    title      TEXT    NOT NULL,
    body       TEXT    NOT NULL DEFAULT '',
    created_at INTEGER NOT NULL
);

CREATE INDEX posts_user_id_id ON posts (user_id, id);
