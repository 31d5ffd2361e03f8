-- The search key of each name (store.NameKey: the name under Unicode simple case folding), for the
-- case-insensitive name search. The key is computed in Go, not by PostgreSQL's lower(), whose result
-- depends on the collation and is not Unicode case folding; the migration's Go step (fillNameKeys
-- in migrate.go) fills it for existing users. COLLATE "C": keys compare byte-wise, as on SQLite.
ALTER TABLE users ADD COLUMN name_key TEXT COLLATE "C" NOT NULL DEFAULT '';
