// Watching users: WatchUsers on every RPC protocol and GET /users/events as Server-Sent Events, one
// implementation behind both. A watch validates where it resumes, reads the log from there until it
// has caught up, then takes what the feed hands out, with a heartbeat while nothing changes.
package handlers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"connectrpc.com/connect"

	usersv1 "usersd/gen/users/v1"
	"usersd/store"
)

const (
	// DefaultWatchHeartbeat is how long a watch stays silent at most when Config.WatchHeartbeat
	// is 0: under the idle timeouts of common proxies and load balancers (30 to 60 seconds).
	DefaultWatchHeartbeat = 15 * time.Second
	// DefaultMaxWatchers is the limit of open watches when Config.MaxWatchers is 0.
	DefaultMaxWatchers = 10_000
	// watchWriteTimeout is how long a watch's client may take to accept a message before the
	// stream is cut, beyond the heartbeat interval in which the next message is due anyway.
	watchWriteTimeout = 10 * time.Second
	// deadlineRefreshEvery spaces the refreshes of a watch's deadlines: a refresh is a message to
	// the connection's goroutine, and a busy watch sends many messages a second.
	deadlineRefreshEvery = time.Second
)

// WatchUsers streams the changes of users (see the proto).
func (u *Users) WatchUsers(ctx context.Context, req *usersv1.WatchUsersRequest, stream *connect.ServerStream[usersv1.UserEvent]) error {
	return u.watch(ctx, req, stream.Send)
}

// watchStream is one watch: where it is in the log, and how it sends.
type watchStream struct {
	users *Users
	role  string
	// last is the newest sequence the watch has handled (sent, or left out by the role filter).
	last int64
	send func(*usersv1.UserEvent) error
	// conn holds the connection's deadlines; refreshed is when they were last pushed forward.
	conn      *http.ResponseController
	refreshed time.Time
	heartbeat *time.Timer
	// flushes lets a batch of changes go out with one flush (nil outside a server's request).
	flushes *flushGate
}

// watch runs a watch until its client leaves, it falls too far behind, or the server stops. An
// error before the first message is sent (a bad request, a resume point not kept, the watcher
// limit) is the stream's only answer, so REST can still give it a status of its own.
func (u *Users) watch(ctx context.Context, req *usersv1.WatchUsersRequest, send func(*usersv1.UserEvent) error) error {
	if err := checkLine("role", req.GetRole(), maxRoleLength); err != nil {
		return err
	}
	after := int64(-1) // from now
	if req.AfterSequence != nil {
		if after = req.GetAfterSequence(); after < 0 {
			return invalidArgument("after_sequence must be 0 or more, got %d", after)
		}
	}
	w, err := u.feed.join()
	if err != nil {
		return err
	}
	defer u.feed.leave(w)

	// The first read checks the resume point before anything is sent.
	first, err := readLog(ctx, u.store, after, feedBatch)
	if err != nil {
		return resumeError(after, err)
	}
	ws := &watchStream{users: u, role: req.GetRole(), last: after, send: send}
	if after < 0 {
		ws.last = first.Latest
	}
	if info := infoOf(ctx); info != nil {
		ws.conn, ws.flushes = http.NewResponseController(info.writer), info.flushes
		// The server's read timeout would end the connection's background read, and with it the
		// watch, however alive its client is; the client sends nothing more after its request.
		ws.conn.SetReadDeadline(time.Time{})
	}
	ws.heartbeat = time.NewTimer(u.heartbeat)
	defer ws.heartbeat.Stop()
	if err := ws.sendHeartbeat(); err != nil {
		return err
	}

	// Catch up from the log, join the feed, then read the log once more: what was written between
	// the last read and joining is in that read, and everything after it comes from the feed.
	if err := ws.catchUp(ctx, first); err != nil {
		return err
	}
	if err := u.feed.listen(ctx, w); err != nil {
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
		case <-w.ended: // before anything else waiting: a watch too slow must not go on
			return w.err
		default:
		}
		select {
		case <-w.ended:
			return w.err
		case <-ctx.Done():
			return fromStore(ctx.Err())
		case <-w.ready:
			if err := ws.handleQueued(w); err != nil {
				return err
			}
		case <-ws.heartbeat.C:
			if err := ws.sendHeartbeat(); err != nil {
				return err
			}
		}
	}
}

// resumeError is the client error for a resume point that the log cannot serve.
func resumeError(after int64, err error) error {
	switch {
	case errors.Is(err, store.ErrEventsSwept):
		return newHTTPError(http.StatusGone, connect.CodeFailedPrecondition,
			"the changes after sequence %d are no longer kept (changes are kept for at least %s); reload the users, then watch from now",
			after, store.EventTTL)
	case errors.Is(err, store.ErrEventsAhead):
		return newHTTPError(http.StatusGone, connect.CodeFailedPrecondition,
			"sequence %d is newer than every change this service has made; reload the users, then watch from now", after)
	}
	return fromStore(err)
}

// catchUp sends the changes of page, then of the log after them, until a read comes back short of
// a whole batch: the watch then has every change up to the newest at that read.
func (ws *watchStream) catchUp(ctx context.Context, page store.UserEvents) error {
	for {
		batch := changesOf(page.Events)
		if err := ws.inOneFlush(func() error { return ws.handle(batch) }); err != nil {
			return err
		}
		if len(page.Events) < feedBatch {
			return nil
		}
		var err error
		if page, err = ws.read(ctx); err != nil {
			return err
		}
	}
}

// read reads the log after the watch's position.
func (ws *watchStream) read(ctx context.Context) (store.UserEvents, error) {
	page, err := readLog(ctx, ws.users.store, ws.last, feedBatch)
	if err != nil {
		return store.UserEvents{}, resumeError(ws.last, err)
	}
	return page, nil
}

// handleQueued sends every batch that the feed has queued for w, with one flush for them all.
func (ws *watchStream) handleQueued(w *watcher) error {
	return ws.inOneFlush(func() error {
		for _, batch := range w.take() {
			err := ws.handle(batch)
			w.release(len(batch))
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// inOneFlush runs send with the stream's flushes held, then flushes once. A failed flush, like a
// failed write, means that the client is gone; an error of send wins.
func (ws *watchStream) inOneFlush(send func() error) error {
	ws.flushes.hold()
	err := send()
	if failed := ws.flushes.release(); failed != nil && err == nil {
		err = ws.clientGone(failed)
	}
	return err
}

// handle sends the changes of batch that the watch has not handled yet and that pass its filter.
func (ws *watchStream) handle(batch []change) error {
	for _, c := range batch {
		if c.Sequence <= ws.last {
			continue // read from the log and handed out by the feed too
		}
		ws.last = c.Sequence
		if ws.role != "" && !c.HasRole(ws.role) {
			continue
		}
		if err := ws.write(c.message); err != nil {
			return err
		}
		ws.users.metrics.eventSent()
	}
	return nil
}

func (ws *watchStream) sendHeartbeat() error {
	return ws.write(&usersv1.UserEvent{Sequence: ws.last, Kind: usersv1.UserEvent_KIND_HEARTBEAT})
}

// write sends one message with the connection's write deadline pushed forward: far enough that the
// next message (a heartbeat at the latest) is due before it passes, so that only a client that
// stops reading is cut, after watchWriteTimeout. It replaces the server's write timeout, which
// would otherwise end every watch.
func (ws *watchStream) write(m *usersv1.UserEvent) error {
	if now := time.Now(); ws.conn != nil && now.Sub(ws.refreshed) >= deadlineRefreshEvery {
		ws.conn.SetWriteDeadline(now.Add(ws.users.heartbeat + deadlineRefreshEvery + watchWriteTimeout))
		ws.refreshed = now
	}
	if err := ws.send(m); err != nil {
		return ws.clientGone(err)
	}
	ws.heartbeat.Reset(ws.users.heartbeat)
	return nil
}

// clientGone is the error of a failed write: the client left, or stopped reading until the
// deadline cut the stream. Nobody is there to read it, and it is no fault of the service.
func (ws *watchStream) clientGone(err error) error {
	return connect.NewError(connect.CodeCanceled, fmt.Errorf("the client stopped taking the stream at sequence %d: %w", ws.last, err))
}

// eventToProto is the message of a change: the user as the change left it, the id alone for a
// delete.
func eventToProto(e store.UserEvent) *usersv1.UserEvent {
	m := &usersv1.UserEvent{Sequence: e.Sequence}
	switch e.Kind {
	case store.EventCreated:
		m.Kind, m.User = usersv1.UserEvent_KIND_CREATED, userToProto(e.User)
	case store.EventUpdated:
		m.Kind, m.User = usersv1.UserEvent_KIND_UPDATED, userToProto(e.User)
	case store.EventDeleted:
		m.Kind, m.User = usersv1.UserEvent_KIND_DELETED, &usersv1.User{Id: e.User.ID}
	}
	return m
}
