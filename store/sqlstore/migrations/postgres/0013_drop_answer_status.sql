-- An idempotency record's status was always a create's 201 and was never read back: whether a
-- request still runs is whether its response is NULL. Dropping a column rewrites no row.
ALTER TABLE idempotency_keys DROP COLUMN status;
