-- usersd:no-transaction
-- The indexes of soft delete (0017), built CONCURRENTLY so that the replicas' writes go on while a
-- large table is read; like 0016, each statement runs alone and the file is safe to run again.
--
-- Lists leave deleted users out with "delete_time IS NULL": the sort indexes of 0001 and 0006
-- still give every page its order, and skip the few deleted users (those within their retention)
-- as they go. The name search counts its matches from an index alone, which must then hold
-- delete_time too: this one replaces users_name_key_role, for searches with deleted users and
-- without.
DROP INDEX CONCURRENTLY IF EXISTS users_name_key_role_delete_time;
CREATE INDEX CONCURRENTLY users_name_key_role_delete_time ON users (name_key, role, delete_time);
DROP INDEX CONCURRENTLY IF EXISTS users_name_key_role;
-- The purge of expired users reads the due ones, oldest first, from the deleted users alone.
DROP INDEX CONCURRENTLY IF EXISTS users_purge_time;
CREATE INDEX CONCURRENTLY users_purge_time ON users (purge_time) WHERE purge_time IS NOT NULL;
