-- The users changed since a time, as identity providers ask for them over SCIM
-- (meta.lastModified gt "..."), and any filter on updated_at: one range of this index, as
-- created_at's are of users_created_at_id.
CREATE INDEX users_updated_at_id ON users (updated_at, id);
