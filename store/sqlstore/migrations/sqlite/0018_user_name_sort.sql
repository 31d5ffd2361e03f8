-- Lists sorted by user name ignoring case, as SCIM's sortBy=userName asks: one range of this index,
-- read forwards or backwards (store.SortByUserName breaks its ties by id in the sort's direction,
-- so one index serves both). The unique index on user_name_key leaves out the users without a user
-- name, which a list holds too.
CREATE INDEX users_user_name_key_id ON users (user_name_key, id);
