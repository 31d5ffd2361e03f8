-- Exact user counts, overall ('all') and per role ('role:<role>'), kept by a trigger in the same
-- transaction as every insert, role change and delete, so that X-Total-Count costs one row read
-- instead of a scan of every user. Counts of zero are kept (a role may come back).
CREATE TABLE user_counts (
    scope TEXT   COLLATE "C" PRIMARY KEY,
    n     BIGINT NOT NULL
);

INSERT INTO user_counts (scope, n) SELECT 'all', COUNT(*) FROM users;
INSERT INTO user_counts (scope, n) SELECT 'role:' || role, COUNT(*) FROM users GROUP BY role;

CREATE FUNCTION users_count() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('DELETE', 'UPDATE') THEN
        UPDATE user_counts SET n = n - 1
            WHERE scope = 'role:' || OLD.role OR (TG_OP = 'DELETE' AND scope = 'all');
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO user_counts (scope, n) VALUES ('role:' || NEW.role, 1)
            ON CONFLICT (scope) DO UPDATE SET n = user_counts.n + 1;
    END IF;
    IF TG_OP = 'INSERT' THEN
        INSERT INTO user_counts (scope, n) VALUES ('all', 1)
            ON CONFLICT (scope) DO UPDATE SET n = user_counts.n + 1;
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER users_count_insert_delete AFTER INSERT OR DELETE ON users
    FOR EACH ROW EXECUTE FUNCTION users_count();
CREATE TRIGGER users_count_role AFTER UPDATE OF role ON users
    FOR EACH ROW WHEN (OLD.role IS DISTINCT FROM NEW.role) EXECUTE FUNCTION users_count();
