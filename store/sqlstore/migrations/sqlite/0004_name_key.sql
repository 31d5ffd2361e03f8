-- The search key of each name (store.NameKey: the name under Unicode simple case folding), for the
-- case-insensitive name search. The key is computed in Go, not by SQLite's lower(), which folds
-- only ASCII; the migration's Go step (fillNameKeys in migrate.go) fills it for existing users.
ALTER TABLE users ADD COLUMN name_key TEXT NOT NULL DEFAULT '';
