// Streams: the answer of a route that lasts as long as its client watches (WatchUsers on every RPC
// protocol, GET /users/events). Such a route sheds the request deadline; its writer keeps the
// connection's deadlines instead, and lets the service send a batch of messages with one flush.
package handlers

import (
	"context"
	"net/http"
	"time"

	"connectrpc.com/connect"

	usersv1 "usersd/gen/users/v1"
	"usersd/gen/users/v1/usersv1connect"
	"usersd/users"
)

const (
	// watchWriteTimeout is how long a stream's client may take to accept a message before the
	// stream is cut, beyond the heartbeat interval in which the next message is due anyway.
	watchWriteTimeout = 10 * time.Second
	// deadlineRefreshEvery spaces the refreshes of a stream's write deadline: a refresh is a
	// message to the connection's goroutine, and a busy stream sends many messages a second.
	deadlineRefreshEvery = time.Second
	// streamEndGrace is how long the last bytes of a stream that has ended may take.
	streamEndGrace = time.Second
)

// streamWriter is the writer of a stream's answer.
//
// Deadlines: the server's read timeout would end the connection's background read, and with it
// the stream, however alive its client is (the client sends nothing after its request), so the
// read deadline is cleared; and every write pushes the write deadline forward, far enough that the
// next message (a heartbeat at the latest) is due before it passes, so that only a client that
// stops reading is cut, after watchWriteTimeout. It replaces the server's write timeout, which
// would otherwise end every stream.
//
// Flushes: connect flushes the answer after every message it sends; on HTTP/2 each flush is a DATA
// frame of its own, handed to the connection's goroutine. While the writer is held, flushes are
// put off until it is released (measured in docs/PERFORMANCE.md#device-watch-flush). Only the
// stream's own goroutine uses it.
type streamWriter struct {
	http.ResponseWriter
	conn          *http.ResponseController
	heartbeat     time.Duration
	refreshed     time.Time
	held, pending bool
}

type streamWriterKey struct{}

// asStream serves h as a stream whose longest silence is heartbeat, without the request deadline.
// The stream's writer is also in the request's context, for the RPC method that sends on it through
// connect (see rpcUsers).
func asStream(heartbeat time.Duration, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &streamWriter{ResponseWriter: w, conn: http.NewResponseController(w), heartbeat: heartbeat}
		sw.conn.SetReadDeadline(time.Time{})
		if r.ProtoMajor == 1 {
			if c := tcpConnOf(r.Context()); c != nil {
				c.SetWriteBuffer(watchSendBuffer) // see watchSendBuffer; the stream works without it
				resetWhenClosed(c)
			}
			// A stream's connection is not kept for another request: it ends with the stream, so
			// that one whose client stopped reading does not linger with full buffers.
			w.Header().Set("Connection", "close")
		}
		h.ServeHTTP(sw, r.WithContext(context.WithValue(withoutDeadline(r.Context()), streamWriterKey{}, sw)))
		// What is left to send after the stream ends (its last bytes, the end of an HTTP/1.1
		// chunked body) gets a moment, not a whole write timeout: a client that stopped reading,
		// whose stream was cut for it, then has its connection closed at once rather than held
		// with full buffers.
		sw.conn.SetWriteDeadline(time.Now().Add(streamEndGrace))
		if c := tcpConnOf(r.Context()); c != nil && r.ProtoMajor == 1 {
			sw.conn.Flush()
			abortIfStalled(c, streamEndGrace)
		}
	})
}

// streamWriterOf returns the writer of the stream that ctx belongs to, or nil outside one.
func streamWriterOf(ctx context.Context) *streamWriter {
	sw, _ := ctx.Value(streamWriterKey{}).(*streamWriter)
	return sw
}

func (s *streamWriter) WriteHeader(status int) {
	s.refreshWriteDeadline()
	s.ResponseWriter.WriteHeader(status)
}

func (s *streamWriter) Write(b []byte) (int, error) {
	s.refreshWriteDeadline()
	return s.ResponseWriter.Write(b)
}

// refreshWriteDeadline pushes the write deadline forward, once every deadlineRefreshEvery at most.
func (s *streamWriter) refreshWriteDeadline() {
	if now := time.Now(); now.Sub(s.refreshed) >= deadlineRefreshEvery {
		s.conn.SetWriteDeadline(now.Add(s.heartbeat + deadlineRefreshEvery + watchWriteTimeout))
		s.refreshed = now
	}
}

func (s *streamWriter) Flush() { s.FlushError() }

// FlushError is what http.ResponseController calls, so that a failed flush is not lost.
func (s *streamWriter) FlushError() error {
	if s.held {
		s.pending = true
		return nil
	}
	return s.conn.Flush()
}

// Unwrap lets http.ResponseController reach the connection's own writer, for deadlines.
func (s *streamWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// inOneFlush runs send with the flushes held, then flushes once if anything was put off. An error
// of send wins over one of the flush.
func (s *streamWriter) inOneFlush(send func() error) error {
	s.held = true
	err := send()
	s.held = false
	if s.pending {
		s.pending = false
		if flushErr := s.conn.Flush(); err == nil {
			err = flushErr
		}
	}
	return err
}

// rpcUsers is the Users service as connect mounts it: the service's own methods, but a watch sends
// on the stream's writer, so that a batch of changes goes out in one flush.
type rpcUsers struct{ *users.Service }

var _ usersv1connect.UsersHandler = rpcUsers{}

func (u rpcUsers) WatchUsers(ctx context.Context, req *usersv1.WatchUsersRequest, stream *connect.ServerStream[usersv1.UserEvent]) error {
	return u.Watch(ctx, req, rpcWatchStream{stream: stream, writer: streamWriterOf(ctx)})
}

// rpcWatchStream sends a watch's batches on a connect stream, with one flush for each batch.
type rpcWatchStream struct {
	stream *connect.ServerStream[usersv1.UserEvent]
	writer *streamWriter // nil if the route was not mounted as a stream: each message is flushed
}

func (s rpcWatchStream) Send(batch []*usersv1.UserEvent) error {
	send := func() error {
		for _, m := range batch {
			if err := s.stream.Send(m); err != nil {
				return err
			}
		}
		return nil
	}
	if s.writer == nil {
		return send()
	}
	return s.writer.inOneFlush(send)
}
