// Watching users: one implementation (Watch) behind WatchUsers on every RPC protocol and the HTTP
// face's Server-Sent Events. A watch validates where it resumes, reads the log from there until it has
// caught up, then takes what the feed hands out, with a heartbeat while nothing changes.
package users

import (
	"context"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"

	usersv1 "usersd/gen/users/v1"
	"usersd/store"
)

// WatchStream is where a watch sends its messages. The HTTP face makes one of each watch's answer,
// and keeps what belongs to the connection there: its deadlines, and how its writes are flushed.
type WatchStream interface {
	// Send sends the messages in order, as one batch: a stream that can put them in one write (one
	// HTTP/2 frame, one flush) should. An error means the client is gone or stopped reading.
	Send(batch []*usersv1.UserEvent) error
}

// watch is one watch as it runs: where it is in the log, and where it sends.
type watch struct {
	service *Service
	role    string
	// showActors says that the watcher sent a credential, and so sees who made each change.
	showActors bool
	// last is the newest sequence the watch has handled (sent, or left out by the role filter).
	last      int64
	stream    WatchStream
	heartbeat *time.Timer
}

// Watch runs a watch until its client leaves, it falls too far behind, or EndWatches is called.
// An error before the first message is sent (a bad request, a resume point not kept, the watcher
// limit) is the stream's only answer, so a face can still give it a status of its own.
func (s *Service) Watch(ctx context.Context, req *usersv1.WatchUsersRequest, stream WatchStream) error {
	if err := checkConsistencyToken(ctx); err != nil {
		return err
	}
	if err := checkLine("role", req.GetRole(), maxRoleLength); err != nil {
		return err
	}
	after := int64(-1) // from now
	if req.AfterSequence != nil {
		if after = req.GetAfterSequence(); after < 0 {
			return InvalidField("after_sequence", "after_sequence must be 0 or more, got %d", after)
		}
	}
	w, err := s.feed.join()
	if err != nil {
		return err
	}
	defer s.feed.leave(w)

	// The first read checks the resume point before anything is sent.
	first, err := readLog(ctx, s.store, after, feedBatch)
	if err != nil {
		return resumeError(after, err)
	}
	caller, credentialed := CallerOf(ctx)
	ws := &watch{service: s, role: req.GetRole(), showActors: credentialed, last: after, stream: stream}
	// A watch lasts no longer than the credential it was opened with: a token that expires ends it.
	var expired <-chan time.Time
	if !caller.Expires.IsZero() {
		timer := time.NewTimer(time.Until(caller.Expires))
		defer timer.Stop()
		expired = timer.C
	}
	if after < 0 {
		ws.last = first.Latest
	}
	ws.heartbeat = time.NewTimer(s.heartbeat)
	defer ws.heartbeat.Stop()
	if err := ws.sendHeartbeat(); err != nil {
		return err
	}

	// Catch up from the log, join the feed, then read the log once more: what was written between
	// the last read and joining is in that read, and everything after it comes from the feed.
	if err := ws.catchUp(ctx, first); err != nil {
		return err
	}
	if err := s.feed.listen(ctx, w); err != nil {
		return fromStore(err)
	}
	since, err := ws.read(ctx)
	if err != nil {
		return err
	}
	if err := ws.catchUp(ctx, since); err != nil {
		return err
	}
	for {
		select {
		case <-w.ended(): // before anything else waiting: a watch too slow must not go on
			return w.err()
		default:
		}
		select {
		case <-w.ended():
			return w.err()
		case <-ctx.Done():
			return fromStore(ctx.Err())
		case <-w.ready():
			if err := ws.handleQueued(w); err != nil {
				return err
			}
		case <-ws.heartbeat.C:
			if err := ws.sendHeartbeat(); err != nil {
				return err
			}
		case <-expired:
			return NewError(connect.CodeUnauthenticated, "",
				"the credential this watch was opened with has expired; watch again with a new one, after sequence %d", ws.last)
		}
	}
}

// resumeError is the client error for a resume point that the log cannot serve.
func resumeError(after int64, err error) error {
	switch {
	case errors.Is(err, store.ErrEventsSwept):
		return NewError(connect.CodeFailedPrecondition, ReasonChangesNotKept,
			"the changes after sequence %d are no longer kept (changes are kept for at least %s); reload the users, then watch from now",
			after, store.EventTTL)
	case errors.Is(err, store.ErrEventsAhead):
		return NewError(connect.CodeFailedPrecondition, ReasonChangesNotKept,
			"sequence %d is newer than every change this service has made; reload the users, then watch from now", after)
	}
	return fromStore(err)
}

// catchUpReads is how many reads of the log the watches catching up from far back make at once,
// in the whole process. Such a watch reads the log page after page, and a few hundred of them
// would otherwise take every connection of the store's pool from the lists (on SQLite, the pool
// is four connections on two cores). A watch waiting for its turn holds no connection, and each
// watch's first page (all that a watch from now or from a recent change needs) takes no turn, so
// a watch costs what a list does until it asks for more.
const catchUpReads = 2

// catchUp sends the changes of page, then of the log after them, until a read comes back short of
// a whole batch: the watch then has every change up to the newest at that read. Each page is sent
// before the next is read, so a watch holds one page at a time.
func (ws *watch) catchUp(ctx context.Context, page store.UserEvents) error {
	for {
		if err := ws.send(ws.pick(nil, changesOf(page.Events))); err != nil {
			return err
		}
		if len(page.Events) < feedBatch {
			return nil
		}
		var err error
		if page, err = ws.readMore(ctx); err != nil {
			return err
		}
	}
}

// readMore reads the next page of a catch-up in its turn among the watches catching up.
func (ws *watch) readMore(ctx context.Context) (store.UserEvents, error) {
	select {
	case ws.service.catchUpTurns <- struct{}{}:
	case <-ctx.Done():
		return store.UserEvents{}, fromStore(ctx.Err())
	}
	defer func() { <-ws.service.catchUpTurns }()
	return ws.read(ctx)
}

// read reads the log after the watch's position.
func (ws *watch) read(ctx context.Context) (store.UserEvents, error) {
	page, err := readLog(ctx, ws.service.store, ws.last, feedBatch)
	if err != nil {
		return store.UserEvents{}, resumeError(ws.last, err)
	}
	return page, nil
}

// handleQueued sends every batch that the feed has queued for w, as one batch.
func (ws *watch) handleQueued(w *watcher) error {
	var messages []*usersv1.UserEvent
	taken := 0
	for _, batch := range w.take() {
		messages = ws.pick(messages, batch)
		taken += len(batch)
	}
	err := ws.send(messages)
	w.release(taken)
	return err
}

// pick appends to messages those of batch that the watch has not handled yet and that pass its
// filter, and moves the watch's position past the whole batch.
func (ws *watch) pick(messages []*usersv1.UserEvent, batch []change) []*usersv1.UserEvent {
	for _, c := range batch {
		if c.Sequence <= ws.last {
			continue // read from the log and handed out by the feed too
		}
		ws.last = c.Sequence
		if ws.role != "" && !c.HasRole(ws.role) {
			continue
		}
		if ws.showActors {
			messages = append(messages, c.message)
		} else {
			messages = append(messages, c.anonymous)
		}
	}
	return messages
}

// send sends a batch of changes, if there are any.
func (ws *watch) send(messages []*usersv1.UserEvent) error {
	if len(messages) == 0 {
		return nil
	}
	if err := ws.write(messages); err != nil {
		return err
	}
	ws.service.metrics.EventsSent(len(messages))
	return nil
}

func (ws *watch) sendHeartbeat() error {
	return ws.write([]*usersv1.UserEvent{{Sequence: ws.last, Kind: usersv1.UserEvent_KIND_HEARTBEAT}})
}

// write sends messages and puts off the next heartbeat.
func (ws *watch) write(messages []*usersv1.UserEvent) error {
	if err := ws.stream.Send(messages); err != nil {
		return ws.clientGone(err)
	}
	ws.heartbeat.Reset(ws.service.heartbeat)
	return nil
}

// clientGone is the error of a failed send: the client left, or stopped reading until the
// connection's deadline cut the stream. Nobody is there to read it, and it is no fault of the service.
func (ws *watch) clientGone(err error) error {
	return &Error{code: connect.CodeCanceled, message: fmt.Sprintf("the client stopped taking the stream at sequence %d: %v", ws.last, err), cause: err}
}
