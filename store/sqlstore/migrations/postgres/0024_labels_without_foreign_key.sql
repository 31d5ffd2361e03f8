-- The label side table (0019) loses its foreign key: the table is derived, its rows written by
-- the triggers of users' inserts and updates (0019, 0023) in the write's own transaction from
-- users that exist, so the key checked nothing those triggers do not already hold, while a batch
-- create paid a lookup and a row lock of the user for each of its labels (docs/PERFORMANCE-LOG.md,
-- 2026-11-27, labels without a foreign key). What its ON DELETE CASCADE did, a row trigger does,
-- as the cascade did: a user's rows go with it, found by the primary key's user_id, in the delete's
-- statement. (A statement trigger would keep, per session, the plan of its first delete, which for
-- a bulk delete is a scan of every label.)
--
-- One transaction, which holds users' lock for a moment: a replica of the previous release deletes
-- users as before, and the trigger takes their rows as the cascade did.
CREATE FUNCTION users_labels_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM user_labels WHERE user_id = OLD.id;
    RETURN NULL;
END;
$$;

CREATE TRIGGER users_labels_delete AFTER DELETE ON users
    FOR EACH ROW WHEN (OLD.labels <> '{}') EXECUTE FUNCTION users_labels_deleted();

ALTER TABLE user_labels DROP CONSTRAINT user_labels_user_id_fkey;
