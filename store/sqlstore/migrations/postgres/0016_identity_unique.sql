-- usersd:no-transaction
-- The unique indexes of 0015's identity fields, partial since an empty value means none. Built
-- CONCURRENTLY, so that the replicas' writes go on while a large table is read: a plain CREATE
-- INDEX would hold off every write until it ends. CONCURRENTLY cannot run in a transaction, so
-- the runner runs each statement of this file alone (see migrate.go), and the file must be safe to
-- run again: a build that failed half way leaves an invalid index, which the DROP removes.
DROP INDEX CONCURRENTLY IF EXISTS users_user_name_unique;
CREATE UNIQUE INDEX CONCURRENTLY users_user_name_unique ON users (user_name_key) WHERE user_name_key <> '';
DROP INDEX CONCURRENTLY IF EXISTS users_email_unique;
CREATE UNIQUE INDEX CONCURRENTLY users_email_unique ON users (email_key) WHERE email_key <> '';
DROP INDEX CONCURRENTLY IF EXISTS users_external_id_unique;
CREATE UNIQUE INDEX CONCURRENTLY users_external_id_unique ON users (external_id) WHERE external_id <> '';
