// GET /users/events: the watch of users as Server-Sent Events, for browsers' EventSource and
// `curl -N`. Each change is one event: its sequence as the id (so that a reconnecting EventSource
// resumes with Last-Event-ID), its kind as the event name, and the same JSON as a Connect client
// reads as its data.
package handlers

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"

	"connectrpc.com/connect"

	usersv1 "usersd/gen/users/v1"
	"usersd/handlers/apierror"
	"usersd/handlers/codec"
	"usersd/users"
)

// sseEventNames are the SSE event names of the kinds of change.
var sseEventNames = map[usersv1.UserEvent_Kind]string{
	usersv1.UserEvent_KIND_CREATED:   "created",
	usersv1.UserEvent_KIND_UPDATED:   "updated",
	usersv1.UserEvent_KIND_DELETED:   "deleted",
	usersv1.UserEvent_KIND_HEARTBEAT: "heartbeat",
	usersv1.UserEvent_KIND_UNDELETED: "undeleted",
	usersv1.UserEvent_KIND_PURGED:    "purged",
}

func watchUsersREST(service *users.Service, errs *errorWriter) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, err := watchRequestOf(r)
		if err != nil {
			errs.write(w, r, err)
			return
		}
		if r.Method == http.MethodHead {
			setEventStreamHeaders(w) // what a GET would answer, without a stream that never ends
			return
		}
		stream := &eventStream{w: w, flusher: http.NewResponseController(w)}
		err = service.Watch(watchContext(r), req, stream)
		switch {
		case !stream.started:
			errs.write(w, r, err)
		case err != nil && r.Context().Err() == nil:
			// The status is sent: the error goes in the stream, as an event of its own.
			stream.sendError(apierror.Public(r.Context(), errs.logger, err))
		}
	})
}

// watchRequestOf reads a watch from the query (role, afterSequence) and Last-Event-ID, which wins:
// an EventSource sends it when it reconnects to the URL it first opened.
func watchRequestOf(r *http.Request) (*usersv1.WatchUsersRequest, error) {
	q, err := parseCollectionQuery(r, "role", "afterSequence")
	if err != nil {
		return nil, err
	}
	req := &usersv1.WatchUsersRequest{Role: q.text("role")}
	name, resume := "Last-Event-ID", r.Header.Get("Last-Event-ID")
	if resume == "" {
		name, resume = "afterSequence", q.text("afterSequence")
	}
	if resume != "" {
		after, err := strconv.ParseInt(strings.TrimSpace(resume), 10, 64)
		if err != nil || after < 0 {
			return nil, users.InvalidField(name, "%s must be the sequence of a change (a whole number, 0 or more), got %q", name, resume)
		}
		req.AfterSequence = &after
	}
	return req, nil
}

func setEventStreamHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // nginx and kin: pass each event on at once
}

// sseRetryMin and sseRetrySpread bound the reconnection delay, in milliseconds, that a stream
// gives its EventSource: from 1 to 4 seconds.
const (
	sseRetryMin    = 1000
	sseRetrySpread = 3000
)

// eventStream writes Server-Sent Events: a batch of them in one write and one flush.
type eventStream struct {
	w       http.ResponseWriter
	flusher *http.ResponseController
	started bool
	buf     bytes.Buffer
}

var _ users.WatchStream = (*eventStream)(nil)

func (s *eventStream) Send(batch []*usersv1.UserEvent) error {
	s.buf.Reset()
	if !s.started {
		// How long an EventSource waits before it reconnects, spread over a range so that the
		// watchers of a server that stopped do not all come back in the same instant.
		s.buf.WriteString("retry: ")
		s.buf.WriteString(strconv.Itoa(sseRetryMin + rand.IntN(sseRetrySpread)))
		s.buf.WriteString("\n")
	}
	for _, m := range batch {
		data, err := codec.MarshalJSON(m)
		if err != nil {
			return err
		}
		s.buf.WriteString("id: ")
		s.buf.WriteString(strconv.FormatInt(m.GetSequence(), 10))
		s.buf.WriteString("\nevent: ")
		s.buf.WriteString(sseEventNames[m.GetKind()])
		s.buf.WriteString("\ndata: ")
		s.buf.Write(data) // compact JSON: one line
		s.buf.WriteString("\n\n")
	}
	return s.write()
}

// sendError ends the stream with an "error" event whose data is the REST error body.
func (s *eventStream) sendError(err *connect.Error) {
	s.buf.Reset()
	s.buf.WriteString("event: error\ndata: ")
	s.buf.Write(apierror.RESTBody(err))
	s.buf.WriteString("\n\n")
	s.write() // the stream ends either way
}

func (s *eventStream) write() error {
	if !s.started {
		setEventStreamHeaders(s.w)
		s.w.WriteHeader(http.StatusOK)
		s.started = true
	}
	if _, err := s.w.Write(s.buf.Bytes()); err != nil {
		return err
	}
	if err := s.flusher.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}
