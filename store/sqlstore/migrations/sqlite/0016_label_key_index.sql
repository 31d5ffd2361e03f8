-- The users with a label of a key, in id order: an index on the key alone holds, in a table
-- WITHOUT ROWID, the key and then the primary key's user_id, so that a page in id order of
-- "labels:KEY" walks one range of it (label_pages.go), as one of a label's value walks
-- user_labels_key_value.
CREATE INDEX user_labels_key ON user_labels (key);
