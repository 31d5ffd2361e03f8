// Group commit: the writes that concurrent requests make while a commit is being synced wait for
// it together, and the next commit carries them all, so that many writes pay for one sync to disk
// (SQLite) or one commit of the write-ahead log (PostgreSQL) instead of one each.
package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"usersd/store"
)

// DefaultWriteBatch is the most writes that one commit carries unless WithWriteBatch says
// otherwise. Each write of a batch runs in a savepoint so that it can fail alone, and on PostgreSQL
// a savepoint that writes is a subtransaction: a session keeps the ids of up to 64 of them in
// shared memory (PGPROC_MAX_CACHED_SUBXIDS), and a transaction with more makes every snapshot
// taken anywhere on the server look them up on disk (the "subtransaction overflow"). SQLite has no
// such limit, but a batch of 64 already divides the cost of its sync by 64.
const DefaultWriteBatch = 64

// maxBatchBytes bounds the bytes of the values that one batch writes, so that one commit stays
// short for the write that waits behind it whatever the writes carry. Users are small; posts are
// not (a body may hold 10,000 characters), and 64 of the largest would make a commit of megabytes.
const maxBatchBytes = 1 << 20

// maxWriteRetries is how often a write that lost a deadlock to another replica's batch is put back
// in the queue before its request is told to retry.
const maxWriteRetries = 3

// errStoreClosed answers a write that comes after the store began to close: the client may retry
// it on another replica, or on this one once it has started again.
var errStoreClosed = fmt.Errorf("%w: the store is closed", store.ErrUnavailable)

// writeRun is one request's write. It runs in the transaction of its batch, with the batch's
// context, and reads what it needs from the request's context before it is queued. One request
// that ends must not interrupt the statements of the others (SQLite rolls the whole transaction
// back when a statement in it is interrupted), so the batch's context ends only once every request
// in it has ended: then no one waits for the batch any more, and ending it frees the connection
// (from a lock it waits for, or from a server that stopped answering) for the writes behind it.
type writeRun func(ctx context.Context, tx writeTx) error

// A write is queued, then taken into a batch or withdrawn by its request, never both. A queued
// write may first be made its batch's leader, which its request can no longer withdraw.
const (
	writeQueued int32 = iota
	writeLeading
	writeTaken
	writeWithdrawn
)

// queuedWrite is a write waiting for its batch.
type queuedWrite struct {
	run     writeRun
	size    int
	request context.Context
	// alone marks a write that is a batch of its own (writeAlone): it is committed in a
	// transaction that carries no other write.
	alone   bool
	state   atomic.Int32
	retries int
	done    chan error // receives the write's outcome once its batch has committed or failed
	// lead receives when the write's goroutine is to commit the next batch. A write can be
	// appointed again only after a batch took it and put it back (requeue), at most
	// maxWriteRetries times, and the buffer holds every appointment, so that an appointment, made
	// under the committer's lock, never blocks.
	lead chan struct{}
}

// committer commits the batches of a store's writes on a few connections at once (one on SQLite,
// which has one writer). There is no goroutine of its own: the goroutine of a write that finds a
// connection free commits, and is the batch's leader. It takes every write queued (no timer: a
// lone write commits at once, in its own goroutine, and writes wait only while every connection
// is committing), runs each in a savepoint of one transaction, commits once, answers each, and
// hands its connection to the goroutine of the oldest write still queued, which leads the next
// batch. A write that waits is woken to be answered, or to lead; a lone write is never handed from
// one goroutine to another.
type committer struct {
	db        *sql.DB
	maxWrites int
	// retryable reports a write's error that a later batch may not meet (a deadlock with another
	// replica's batch); checkFile is the SQLite file's check after a commit (see fileGuard).
	retryable func(error) bool
	checkFile func() error
	// refuse is the last finding of the SQLite file's check (Store.refuseWrite): a batch does not
	// start into a file known to be lost.
	refuse func() error
	// kept are the statements prepared for writes (SQLite; nil on PostgreSQL).
	kept *keptStatements

	// committing is the writes of the batches under way; commits and writes count the batches
	// committed and the writes they carried (those that failed alone too).
	committing      atomic.Int64
	commits, writes atomic.Uint64

	mu    sync.Mutex
	queue []*queuedWrite
	// free counts the connections that no leader holds. A write that finds one leads, and a leader
	// hands its connection on while writes are queued, so that no write waits in a queue that no
	// leader will take.
	free    int
	closing bool
	// leaders counts the leaders at work, which close waits for.
	leaders sync.WaitGroup
}

// newCommitter returns a committer of batches on up to connections connections of db at once.
func newCommitter(db *sql.DB, connections, maxWrites int, retryable func(error) bool, checkFile, refuse func() error, kept *keptStatements) *committer {
	return &committer{db: db, maxWrites: maxWrites, retryable: retryable, checkFile: checkFile, refuse: refuse, kept: kept,
		free: connections}
}

// write queues run and returns its outcome once the commit that carries it is durable; its
// goroutine commits the batch itself when a connection is free, or when it is handed one. A
// request that ends while its write is queued withdraws it. Once a batch has taken it, the write's
// outcome is waited for, whatever the request's context says: run may still be writing what it
// found into its caller's variables, and a write that commits after its request ended did commit
// (as one whose commit was under way when its request ended always could). The wait is bounded:
// the batch ends once every request in it has ended (see writeRun).
func (c *committer) write(ctx context.Context, size int, run writeRun) error {
	return c.queued(ctx, &queuedWrite{run: run, size: size, request: ctx})
}

// writeAlone is write for a write that is a batch of its own: one that makes many changes at once
// (a batch of users), which must all commit or all fail together, and which would otherwise fill
// a shared commit and a savepoint with far more than the one request's share of the work. It still
// waits its turn in the queue, so that SQLite's one writer is never taken from the others.
func (c *committer) writeAlone(ctx context.Context, size int, run writeRun) error {
	return c.queued(ctx, &queuedWrite{run: run, size: size, request: ctx, alone: true})
}

// queued queues w and returns its outcome (see write).
func (c *committer) queued(ctx context.Context, w *queuedWrite) error {
	w.done, w.lead = make(chan error, 1), make(chan struct{}, maxWriteRetries+1)
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return errStoreClosed
	}
	c.queue = append(c.queue, w)
	leads := c.free > 0
	if leads {
		c.free--
		c.leaders.Add(1)
		w.state.Store(writeLeading)
	}
	c.mu.Unlock()
	if leads {
		c.lead(w)
	}
	cancelled := ctx.Done()
	for {
		select {
		case err := <-w.done:
			// A batch may take a write appointed to lead before its goroutine has read the
			// appointment, which still holds a connection: every appointment was made before the
			// take that led to this answer, so none comes after these.
			for len(w.lead) > 0 {
				<-w.lead
				c.lead(w)
			}
			return answered(ctx, err)
		case <-w.lead:
			c.lead(w)
		case <-cancelled:
			if w.state.CompareAndSwap(writeQueued, writeWithdrawn) {
				return ctx.Err()
			}
			cancelled = nil // taken, or leading: its outcome comes
		}
	}
}

// answered is the outcome of a write taken into a batch, as its request, whose context is ctx,
// reports it.
func answered(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled) {
		// The batch was ended because every request in it had ended: say how this one did (its
		// deadline passed, say), not how the batch did.
		return ctx.Err()
	}
	return err
}

// lead commits batches on the connection that the calling goroutine holds until one has taken own,
// the leader's own write, then hands the connection on.
func (c *committer) lead(own *queuedWrite) {
	defer c.leaders.Done()
	defer c.handOn() // even if the batch panicked: the connection must not be lost to the writes behind it
	for {
		// Let the goroutines that are ready to run go first: they are mostly requests on their
		// way to queue a write, and a leader that ran ahead of them (a goroutine woken by a
		// channel runs next) would commit batches of one while the others wait their turn.
		// Yielding waits for nothing that is not already under way, so a lone write is not delayed.
		runtime.Gosched()
		if batch := c.take(); len(batch) > 0 {
			c.commit(batch)
		}
		// A batch stops at its bounds, maybe before the leader's own write, which no other
		// goroutine is appointed to take and its request cannot withdraw: lead again.
		if own.state.Load() != writeLeading {
			break
		}
	}
	c.kept.prepareMissingLater() // once every write of the batch is answered
}

// handOn gives the leader's connection to the oldest write still queued, whose goroutine leads the
// next batch, or frees it if none is.
func (c *committer) handOn() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.appoint() {
		c.free++
	}
}

// appoint makes the goroutine of the oldest queued write lead a batch, and reports whether there
// was one. c.mu is held.
func (c *committer) appoint() bool {
	for _, w := range c.queue {
		if w.state.CompareAndSwap(writeQueued, writeLeading) {
			c.leaders.Add(1) // while the appointing leader still counts: close cannot have returned
			w.lead <- struct{}{}
			return true
		}
	}
	return false
}

// close refuses new writes and returns once no batch is being committed: the writes already queued
// are committed first, since a leader hands its connection on while any is.
func (c *committer) close() {
	c.mu.Lock()
	c.closing = true
	c.mu.Unlock()
	c.leaders.Wait()
}

// take removes from the queue the writes of the next batch, oldest first, within its bounds; the
// writes that their requests withdrew are dropped, and a write appointed to lead is taken too (its
// goroutine then leads the writes behind this batch, if there are any, and hands the connection on).
func (c *committer) take() []*queuedWrite {
	c.mu.Lock()
	defer c.mu.Unlock()
	var batch []*queuedWrite
	bytes, taken := 0, 0
	for _, w := range c.queue {
		if len(batch) == c.maxWrites || len(batch) > 0 && (bytes+w.size > maxBatchBytes || w.alone || batch[0].alone) {
			break
		}
		taken++
		if w.state.CompareAndSwap(writeQueued, writeTaken) || w.state.CompareAndSwap(writeLeading, writeTaken) {
			batch, bytes = append(batch, w), bytes+w.size
		}
	}
	rest := copy(c.queue, c.queue[taken:])
	clear(c.queue[rest:])
	c.queue = c.queue[:rest]
	if rest > 0 && c.free > 0 && c.appoint() {
		c.free-- // more than a batch was queued: a free connection takes the rest
	}
	return batch
}

// commit runs a batch in one transaction and answers each write: with its own error if it failed
// (its savepoint rolled back, the others untouched), else with the commit's outcome.
func (c *committer) commit(batch []*queuedWrite) {
	ctx, cancel := context.WithCancel(context.Background()) // see writeRun
	defer cancel()
	var open atomic.Int64
	open.Store(int64(len(batch)))
	for _, w := range batch {
		stop := context.AfterFunc(w.request, func() {
			if open.Add(-1) == 0 {
				cancel()
			}
		})
		defer stop()
	}
	c.committing.Add(int64(len(batch)))
	defer c.committing.Add(-int64(len(batch)))
	answering := false
	defer func() {
		// A panic outside the writes (runSafely catches theirs) goes on up the leader's request,
		// as any fault of a request does; the other writes of the batch, which wait for nothing
		// else, hear of it too.
		if p := recover(); p != nil {
			if !answering {
				for _, w := range batch {
					w.done <- fmt.Errorf("the batch of this write failed: %v", p)
				}
			}
			panic(p)
		}
	}()
	if err := c.refuse(); err != nil {
		answering = true
		for _, w := range batch {
			w.done <- err
		}
		return
	}
	outcomes := make([]error, len(batch))
	err := inTx(ctx, c.db, nil, func(sqlTx *sql.Tx) error {
		tx := writeTx{sqlTx, c.kept}
		if len(batch) == 1 {
			// Alone in its transaction, a write that fails rolls back nothing but itself.
			outcomes[0] = runSafely(ctx, tx, batch[0].run)
			return outcomes[0]
		}
		for i, w := range batch {
			var broken error
			outcomes[i], broken = inSavepoint(ctx, tx, w.run)
			if broken != nil {
				return broken
			}
		}
		return nil
	})
	// The transaction failed for a cause of its own, not only for its one write's.
	batchFailed := err != nil && !(len(batch) == 1 && err == outcomes[0])
	lost := c.checkFile()
	var again []*queuedWrite
	retry := make([]bool, len(batch))
	for i, w := range batch {
		outcome := outcomes[i]
		switch {
		case outcome != nil && c.retryable(outcome) && w.retries < maxWriteRetries && !batchFailed:
			w.retries++
			again, retry[i] = append(again, w), true
			continue
		case outcome == nil:
			outcome = err // nil once committed; else nothing of the batch was kept
		}
		failIfLost(&outcome, lost)
		outcomes[i] = outcome
	}
	if err == nil { // counted before the answers, so that whoever is answered sees the count
		c.commits.Add(1)
		c.writes.Add(uint64(len(batch) - len(again)))
	}
	answering = true
	for i, w := range batch {
		if !retry[i] {
			w.done <- outcomes[i]
		}
	}
	c.requeue(again)
}

// requeue puts writes that lost a deadlock back at the head of the queue, for a later batch: the
// transaction they deadlocked with has ended or will soon, and a write that keeps meeting one is
// told to retry after maxWriteRetries (store.ErrUnavailable).
func (c *committer) requeue(writes []*queuedWrite) {
	if len(writes) == 0 {
		return
	}
	c.mu.Lock()
	queue := make([]*queuedWrite, 0, len(writes)+len(c.queue))
	for _, w := range writes {
		if err := w.request.Err(); err != nil {
			w.done <- fmt.Errorf("%w: the write lost a deadlock and was not committed", err)
			continue
		}
		w.state.Store(writeQueued)
		queue = append(queue, w)
	}
	c.queue = append(queue, c.queue...)
	c.mu.Unlock() // the leader hands its connection to the oldest of them
}

// inSavepoint runs one write of a batch so that its failure undoes only what it wrote. broken
// reports a transaction that cannot go on (the savepoint itself failed: the connection is lost).
func inSavepoint(ctx context.Context, tx writeTx, run writeRun) (outcome, broken error) {
	if _, err := tx.ExecContext(ctx, `SAVEPOINT batched_write`); err != nil {
		return err, err
	}
	outcome = runSafely(ctx, tx, run)
	if outcome != nil {
		if _, err := tx.ExecContext(ctx, `ROLLBACK TO SAVEPOINT batched_write`); err != nil {
			// The transaction itself is gone (a connection lost, SQLite rolled it all back): keep
			// what the write met, which says why, beside what the rollback met.
			return outcome, fmt.Errorf("roll back a failed write of a batch: %w (the write met: %w)", err, outcome)
		}
	}
	if _, err := tx.ExecContext(ctx, `RELEASE SAVEPOINT batched_write`); err != nil {
		return outcome, fmt.Errorf("end a write of a batch: %w", err)
	}
	return outcome, nil
}

// runSafely runs one write, turning a panic in it (in the service's code that builds the answer an
// idempotency key keeps, say) into the write's error: the batch's other writes, and the process,
// go on, as a panicking request alone would have before writes were batched.
func runSafely(ctx context.Context, tx writeTx, run writeRun) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("a write panicked: %v\n%s", p, debug.Stack())
		}
	}()
	return run(ctx, tx)
}

// WriteBatches is what the group commit of a store is doing and has done: how many writes are
// queued for a commit (one withdrawn by its request until a batch drops it) and how many the
// commits under way carry, and how many commits and writes have been made. Without batching every
// count is 0.
type WriteBatches struct {
	Waiting, Committing int
	Commits, Writes     uint64
}

// WriteBatches returns what the store's group commit has done so far.
func (s *Store) WriteBatches() WriteBatches {
	c := s.batches
	if c == nil {
		return WriteBatches{}
	}
	c.mu.Lock()
	waiting := len(c.queue)
	c.mu.Unlock()
	return WriteBatches{Waiting: waiting, Committing: int(c.committing.Load()), Commits: c.commits.Load(), Writes: c.writes.Load()}
}
