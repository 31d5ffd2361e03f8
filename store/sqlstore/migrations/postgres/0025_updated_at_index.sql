-- usersd:no-transaction
-- The users changed since a time, as identity providers ask for them over SCIM
-- (meta.lastModified gt "..."), and any filter on updated_at: one range of this index, as
-- created_at's are of users_created_at_id. Built CONCURRENTLY so that the replicas' writes go on
-- while a large table is read; safe to run again.
DROP INDEX CONCURRENTLY IF EXISTS users_updated_at_id;
CREATE INDEX CONCURRENTLY users_updated_at_id ON users (updated_at, id);
