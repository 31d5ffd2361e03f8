-- Exact user counts, overall ('all') and per role ('role:<role>'), kept by triggers in the same
-- transaction as every insert, role change and delete, so that X-Total-Count costs one row read
-- instead of a scan of every user. Counts of zero are kept (a role may come back).
CREATE TABLE user_counts (
    scope TEXT    PRIMARY KEY,
    n     INTEGER NOT NULL
);

INSERT INTO user_counts (scope, n) SELECT 'all', COUNT(*) FROM users;
INSERT INTO user_counts (scope, n) SELECT 'role:' || role, COUNT(*) FROM users GROUP BY role;

CREATE TRIGGER users_count_insert AFTER INSERT ON users BEGIN
    INSERT INTO user_counts (scope, n) VALUES ('all', 1), ('role:' || NEW.role, 1)
        ON CONFLICT (scope) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER users_count_delete AFTER DELETE ON users BEGIN
    UPDATE user_counts SET n = n - 1 WHERE scope IN ('all', 'role:' || OLD.role);
END;

CREATE TRIGGER users_count_role AFTER UPDATE OF role ON users WHEN OLD.role <> NEW.role BEGIN
    UPDATE user_counts SET n = n - 1 WHERE scope = 'role:' || OLD.role;
    INSERT INTO user_counts (scope, n) VALUES ('role:' || NEW.role, 1)
        ON CONFLICT (scope) DO UPDATE SET n = n + 1;
END;
