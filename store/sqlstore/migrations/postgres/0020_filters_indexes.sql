-- usersd:no-transaction
-- The index of the filter on active, built CONCURRENTLY so that the replicas' writes go on while a
-- large table is read; like 0016, each statement runs alone and the file is safe to run again. The
-- bound value is the first column, id the second, so that either value is one range in id order.
-- Inactive users are the rare side, which this serves; a filter that keeps the active ones (most
-- users) is served as well by walking a sort index and testing each. A partial index of the
-- inactive users would be smaller, but the planner uses one only when the statement spells out its
-- condition, and the filter binds every value.
--
-- After the statements, the Go step (backfillLabels in migrate.go) copies the labels of the users
-- there were before 0019's triggers, in short batches.
DROP INDEX CONCURRENTLY IF EXISTS users_active_id;
CREATE INDEX CONCURRENTLY users_active_id ON users (active, id);
