-- Users and their posts; the same schema as migrations/sqlite/0001, in PostgreSQL's types. Times are
-- Unix microseconds (UTC), so both backends return the same values.
CREATE TABLE users (
    -- An identity never hands out the id of a deleted user again, and every replica draws from it.
    id         INTEGER GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- COLLATE "C": names and roles sort byte-wise, as on SQLite, whatever the database's locale.
    name       TEXT COLLATE "C" NOT NULL,
    role       TEXT COLLATE "C" NOT NULL DEFAULT '',
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    -- Grows by one on every write; the entity tag is derived from it.
    version    BIGINT NOT NULL DEFAULT 1
);

-- One index per sortable attribute, with id as the tie-break, and one for the role filter.
CREATE INDEX users_name_id ON users (name, id);
CREATE INDEX users_role_id ON users (role, id);
CREATE INDEX users_created_at_id ON users (created_at, id);

CREATE TABLE posts (
    id         INTEGER GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id    INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    title      TEXT   NOT NULL,
    body       TEXT   NOT NULL DEFAULT '',
    created_at BIGINT NOT NULL
);

CREATE INDEX posts_user_id_id ON posts (user_id, id);
