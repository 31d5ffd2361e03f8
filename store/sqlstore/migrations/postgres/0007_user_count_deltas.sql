-- Exact user counts (overall, 'all', and per role, 'role:<role>') that cost a few row reads instead
-- of a scan of every user, without the hot row that made migration 0004 drop the first count table:
-- a write never updates a shared row, it only appends its change (+1 or -1 per scope) to
-- user_count_deltas, from a trigger in the write's own transaction, so concurrent writers on every
-- replica never wait for one another. A count is user_counts.n plus the sum of the scope's deltas,
-- read in the same snapshot as the page. Every replica folds the deltas into user_counts about once a
-- second, one replica at a time, in one statement (Store.foldCountDeltas), so a reader sums at most
-- about a second's worth of writes.
CREATE TABLE user_counts (
    scope TEXT   COLLATE "C" PRIMARY KEY,
    n     BIGINT NOT NULL
);

CREATE TABLE user_count_deltas (
    seq   BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    scope TEXT    COLLATE "C" NOT NULL,
    delta INTEGER NOT NULL
);

-- INCLUDE: the sum of a scope's deltas is read from the index.
CREATE INDEX user_count_deltas_scope ON user_count_deltas (scope) INCLUDE (delta);

CREATE FUNCTION users_count_delta() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO user_count_deltas (scope, delta) VALUES ('all', 1), ('role:' || NEW.role, 1);
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO user_count_deltas (scope, delta) VALUES ('all', -1), ('role:' || OLD.role, -1);
    ELSE
        INSERT INTO user_count_deltas (scope, delta) VALUES ('role:' || OLD.role, -1), ('role:' || NEW.role, 1);
    END IF;
    RETURN NULL;
END;
$$;

-- The triggers come first: creating them waits for writes under way and holds new ones until this
-- migration commits, so the counts below see every user that no trigger will count.
CREATE TRIGGER users_count_insert_delete AFTER INSERT OR DELETE ON users
    FOR EACH ROW EXECUTE FUNCTION users_count_delta();
CREATE TRIGGER users_count_role AFTER UPDATE OF role ON users
    FOR EACH ROW WHEN (OLD.role IS DISTINCT FROM NEW.role) EXECUTE FUNCTION users_count_delta();

INSERT INTO user_counts (scope, n) SELECT 'all', COUNT(*) FROM users;
INSERT INTO user_counts (scope, n) SELECT 'role:' || role, COUNT(*) FROM users GROUP BY role;
