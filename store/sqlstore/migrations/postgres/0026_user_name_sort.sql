-- usersd:no-transaction
-- Lists sorted by user name ignoring case, as SCIM's sortBy=userName asks: one range of this index,
-- read forwards or backwards (store.SortByUserName breaks its ties by id in the sort's direction,
-- so one index serves both). The unique index on user_name_key leaves out the users without a user
-- name, which a list holds too. Built CONCURRENTLY so that the replicas' writes go on while a large
-- table is read; safe to run again.
DROP INDEX CONCURRENTLY IF EXISTS users_user_name_key_id;
CREATE INDEX CONCURRENTLY users_user_name_key_id ON users (user_name_key, id);
