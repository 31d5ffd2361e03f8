-- An index for every list the API allows (docs/API.md#lists-at-scale), so that a page costs the same at ten
-- million users as at a thousand: each sort attribute in both directions, alone and after the role
-- filter, always ending in id, the tie-break, ascending. A descending sort needs its own index
-- because its ties still break by id ascending, which a backward scan of (x, id) would reverse.
-- Migration 0001 made (name, id), (role, id) and (created_at, id).
CREATE INDEX users_name_desc_id ON users (name DESC, id);
CREATE INDEX users_role_desc_id ON users (role DESC, id);
CREATE INDEX users_created_at_desc_id ON users (created_at DESC, id);
CREATE INDEX users_role_name_id ON users (role, name, id);
CREATE INDEX users_role_name_desc_id ON users (role, name DESC, id);
CREATE INDEX users_role_created_at_id ON users (role, created_at, id);
CREATE INDEX users_role_created_at_desc_id ON users (role, created_at DESC, id);
-- The name search: a range of keys, with the role beside it so that a search within a role is
-- counted from the index alone.
CREATE INDEX users_name_key_role ON users (name_key, role);
