-- The change log's row of a write is added when the write commits, no longer when it is made: the
-- triggers become constraint triggers deferred to the end of the transaction. The lock that orders
-- the log (0008) is then held only while the commit runs, never while the server waits for the
-- client's next statement. A replica that stopped answering inside a transaction (a partition, a
-- lost host, a frozen process) used to hold it, and with it every other replica's writes, until the
-- server gave up on that session; and each of its writes queued behind the lock took its turn at
-- holding it the same way.
DROP TRIGGER users_event_insert_delete ON users;
DROP TRIGGER users_event_update ON users;

CREATE CONSTRAINT TRIGGER users_event_insert_delete AFTER INSERT OR DELETE ON users
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION users_event();
CREATE CONSTRAINT TRIGGER users_event_update AFTER UPDATE ON users
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW WHEN (OLD.version IS DISTINCT FROM NEW.version) EXECUTE FUNCTION users_event();
