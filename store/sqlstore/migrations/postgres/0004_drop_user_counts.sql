-- Undo 0003 on PostgreSQL. Its 'all' row was updated by every create, so concurrent creates, from
-- every replica, queued behind one row lock until each transaction committed (seen as Lock:
-- transactionid waits in pg_stat_activity, and as stalls of many seconds when a lock holder's
-- process was descheduled). Totals are counted from the rows again, through the role index.
DROP TRIGGER users_count_role ON users;
DROP TRIGGER users_count_insert_delete ON users;
DROP FUNCTION users_count();
DROP TABLE user_counts;
