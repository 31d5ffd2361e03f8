// The feed: one reader of the change log per process, which hands each change to every watcher, so
// that a thousand watchers cost one read of the log per change rather than a thousand.
package users

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"connectrpc.com/connect"

	usersv1 "usersd/gen/users/v1"
	"usersd/store"
)

const (
	// feedPollEvery is how often the feed reads the log without a notice: notices can be lost (a
	// replica's listening connection drops), and this bounds how late a change then arrives.
	feedPollEvery = time.Second
	// feedBatch is the most changes one read of the log returns.
	feedBatch = 500
	// watcherBacklog is how many changes a watcher may have waiting before it counts as too slow and
	// is ended: what bounds the memory a watcher that does not read can hold. (Changes are shared by
	// every watcher; a watcher holds only its queue of them.) A burst of writes as large reaches a
	// watcher that reads at once.
	watcherBacklog = 10_000
	// logReadTimeout bounds every read of the log by a watch or the feed. A watch has no request
	// deadline, and a read that hangs on a database in trouble would otherwise hold a connection
	// of the pool (and, in the feed, every watcher) until TCP noticed.
	logReadTimeout = 10 * time.Second
)

// readLog reads the changes after after, up to limit, within logReadTimeout.
func readLog(ctx context.Context, log store.ChangeLog, after int64, limit int) (store.UserEvents, error) {
	ctx, cancel := context.WithTimeout(ctx, logReadTimeout)
	defer cancel()
	return log.UserEvents(ctx, after, limit)
}

// change is a change of the log as the feed hands it out: shared by every watcher, never modified.
type change struct {
	store.UserEvent
	// message is the change's message; anonymous is the same without its actor, for a watcher
	// without a credential (the same message when there is no actor).
	message, anonymous *usersv1.UserEvent
}

// changesOf makes the changes of events, each with its messages.
func changesOf(events []store.UserEvent) []change {
	batch := make([]change, len(events))
	for i, e := range events {
		m := EventToProto(e)
		anonymous := m
		if m.Actor != "" || m.ActorType != usersv1.UserEvent_ACTOR_TYPE_UNSPECIFIED {
			anonymous = &usersv1.UserEvent{Sequence: m.Sequence, Kind: m.Kind, User: m.User} // the user is shared, never modified
		}
		batch[i] = change{UserEvent: e, message: m, anonymous: anonymous}
	}
	return batch
}

// feed follows the change log while anyone watches, and hands what it reads to every watcher.
type feed struct {
	log         store.ChangeLog
	logger      *slog.Logger
	metrics     Metrics
	maxWatchers int

	mu sync.Mutex
	// joined counts the watches between join and leave, listening or still catching up: what the
	// limit counts.
	joined int
	// listeners are the watchers that receive what the feed reads.
	listeners map[*watcher]struct{}
	// position is the sequence up to which every change has been handed to the listeners; it is
	// known only while there are listeners (the feed does not read the log for nobody).
	position int64
	synced   bool
	// stopped, once set, refuses new watches and has ended every watcher.
	stopped error
	// running says whether the goroutine that follows the log has started; cancelling ctx ends it.
	running bool
	wake    chan struct{}
	ctx     context.Context
	cancel  context.CancelFunc
	done    chan struct{}
}

func newFeed(log store.ChangeLog, logger *slog.Logger, m Metrics, maxWatchers int) *feed {
	ctx, cancel := context.WithCancel(context.Background())
	return &feed{
		log: log, logger: logger, metrics: m, maxWatchers: maxWatchers,
		listeners: map[*watcher]struct{}{},
		wake:      make(chan struct{}, 1), ctx: ctx, cancel: cancel, done: make(chan struct{}),
	}
}

// watcher is one watch as the feed sees it.
type watcher struct {
	mu sync.Mutex
	// queue holds what the feed handed out and the watch has not taken; queued counts the changes
	// in it and in the batches the watch has taken and not yet sent, never more than watcherBacklog.
	queue  [][]change
	queued int
	// queuedSignal has a value when the queue may hold something.
	queuedSignal chan struct{}
	// endedSignal is closed when the feed ends the watch; why says why.
	endedSignal chan struct{}
	why         error
}

// The watch's side of a watcher: ready, ended and err to wait on it; take and release to empty its
// queue. The feed's side is hand and end.

// ready receives when the queue may hold something.
func (w *watcher) ready() <-chan struct{} { return w.queuedSignal }

// ended is closed when the feed has ended the watch; err then says why.
func (w *watcher) ended() <-chan struct{} { return w.endedSignal }

// err says why the feed ended the watch, once ended is closed.
func (w *watcher) err() error { return w.why }

// take returns what the queue holds and empties it; release says the watch is done with n changes.
func (w *watcher) take() [][]change {
	w.mu.Lock()
	defer w.mu.Unlock()
	batches := w.queue
	w.queue = nil
	return batches
}

func (w *watcher) release(n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.queued -= n
}

var (
	errTooManyWatchers = NewError(connect.CodeResourceExhausted, ReasonNone,
		"this server has as many watches as it allows; retry later or on another replica")
	errWatcherTooSlow = NewError(connect.CodeResourceExhausted, ReasonNone,
		"this watch fell too far behind the changes; read faster, then resume after the last sequence you read")
	errServerStopping = NewError(connect.CodeUnavailable, ReasonNone,
		"the server is stopping; resume after the last sequence you read")
	errFeedLost = NewError(connect.CodeUnavailable, ReasonNone,
		"this server lost its place in the changes; resume after the last sequence you read")
)

// join counts a new watch, or refuses it when the server is at its limit or stopping.
func (f *feed) join() (*watcher, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped != nil {
		return nil, f.stopped
	}
	if f.joined >= f.maxWatchers {
		f.metrics.WatchCut("too_many")
		return nil, errTooManyWatchers
	}
	f.joined++
	f.metrics.WatchStarted()
	return &watcher{queuedSignal: make(chan struct{}, 1), endedSignal: make(chan struct{})}, nil
}

// listen makes w receive every change that the feed reads from now on. When nobody listened, the
// feed was not following the log, so it first learns where the log is: every change after that
// reaches w. (The watch itself reads the log up to at least there, so nothing falls between.)
func (f *feed) listen(ctx context.Context, w *watcher) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for f.stopped == nil && !f.synced {
		// The read is made without the lock, which every watcher's join, leave and hand-out takes.
		// Another listener may sync the feed meanwhile; its position serves as well.
		f.mu.Unlock()
		now, err := readLog(ctx, f.log, -1, 0)
		f.mu.Lock()
		if err != nil {
			return err
		}
		if !f.synced {
			f.position, f.synced = now.Latest, true
		}
	}
	if f.stopped != nil {
		return f.stopped
	}
	if !f.running {
		f.running = true
		go f.follow()
	}
	f.listeners[w] = struct{}{}
	return nil
}

// leave ends w's part in the feed; it is called once for every watcher that joined.
func (f *feed) leave(w *watcher) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.unlisten(w)
	f.joined--
	f.metrics.WatchEnded()
}

// end stops handing changes to w and tells it why; the caller holds mu.
func (f *feed) end(w *watcher, err error) {
	f.unlisten(w)
	w.why = err
	close(w.endedSignal)
}

// unlisten stops handing changes to w; with nobody left, the feed stops following the log's
// position. The caller holds mu.
func (f *feed) unlisten(w *watcher) {
	delete(f.listeners, w)
	if len(f.listeners) == 0 {
		f.synced = false
	}
}

// hand gives w a batch of changes, or ends it if that would put it more than watcherBacklog
// changes behind; the caller holds mu.
func (f *feed) hand(w *watcher, batch []change) {
	w.mu.Lock()
	tooSlow := w.queued+len(batch) > watcherBacklog
	if !tooSlow {
		w.queue = append(w.queue, batch)
		w.queued += len(batch)
	}
	w.mu.Unlock()
	if tooSlow {
		f.metrics.WatchCut("too_slow")
		f.end(w, errWatcherTooSlow)
		return
	}
	select {
	case w.queuedSignal <- struct{}{}:
	default: // it has a value already
	}
}

// close refuses new watches and ends every watch with err, and stops following the log.
func (f *feed) close(err error) {
	f.mu.Lock()
	if f.stopped == nil {
		f.stopped = err
		for w := range f.listeners {
			f.metrics.WatchCut("stopping")
			f.end(w, err)
		}
		f.cancel()
	}
	running := f.running
	f.mu.Unlock()
	if running {
		<-f.done
	}
}

// follow reads the log whenever the store says it may have grown, and every feedPollEvery
// regardless, until the feed closes.
func (f *feed) follow() {
	defer close(f.done)
	stopNotices := f.log.NotifyUserEvents(f.wake)
	defer stopNotices()
	poll := time.NewTicker(feedPollEvery)
	defer poll.Stop()
	for {
		select {
		case <-f.ctx.Done():
			return
		case <-f.wake:
		case <-poll.C:
		}
		f.readNew(f.ctx)
	}
}

// readNew hands every change after the feed's position to the listeners.
func (f *feed) readNew(ctx context.Context) {
	for {
		f.mu.Lock()
		if !f.synced {
			f.mu.Unlock()
			return // nobody listens
		}
		from := f.position
		f.mu.Unlock()

		page, err := readLog(ctx, f.log, from, feedBatch)
		if err != nil {
			if ctx.Err() == nil {
				f.lostTrack(err)
			}
			return
		}
		batch := changesOf(page.Events) // before the lock, which every watcher's join and leave takes
		f.mu.Lock()
		if f.synced && f.position == from && len(batch) > 0 {
			f.position = batch[len(batch)-1].Sequence
			for w := range f.listeners {
				f.hand(w, batch)
			}
		}
		// Otherwise everyone left while the feed read, and the next listener synced it anew: what
		// it read is of no use.
		f.mu.Unlock()
		if len(page.Events) < feedBatch {
			return
		}
	}
}

// lostTrack handles a failed read of the log. The store being unreachable is tried again at the
// next notice or poll. The feed's position swept from under it (it fell a whole EventTTL behind)
// means it can no longer serve its watchers without a hole: each is ended, to resume on its own
// and learn whether it must reload.
func (f *feed) lostTrack(err error) {
	if !errors.Is(err, store.ErrEventsSwept) {
		f.logger.Warn("reading the change log failed; retrying", "error", err)
		return
	}
	f.logger.Error("the change log was swept past the feed's position; ending every watch", "error", err)
	f.mu.Lock()
	defer f.mu.Unlock()
	for w := range f.listeners {
		f.end(w, errFeedLost)
	}
}
