// Middleware that every request passes through: request id and deadline, the final error handler
// (recover), the body limit, and the checks that HTTP needs before any route.
package handlers

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"runtime/debug"
	"time"
	"usersd/handlers/apierror"
	"usersd/users"

	"connectrpc.com/connect"
)

// withRequestContext gives every request an id, echoed in the response so that a client can quote
// it and logged with every line of the request, and gives its work a deadline (none if timeout is
// 0), which the store's queries honour: a request cannot hold a connection or the writer for
// longer, and a client that goes away cancels it at once. Both go into the request's context in
// one step, since each step copies the request (docs/PERFORMANCE-LOG.md, 2026-11-21). A stream
// route sheds the deadline again (see withoutDeadline). The id is the request's X-Request-Id only
// if trustHeader says a proxy sets it (a sane one); otherwise it is new, and a sane X-Request-Id is
// kept to be logged beside it.
func withRequestContext(timeout time.Duration, trustHeader bool, budget *answerBudget, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info := &requestInfo{answer: answerHold{budget: budget}, start: time.Now()}
		defer info.answer.release()
		if sent := headerValue(r.Header, "X-Request-Id"); isSafeRequestID(sent) {
			if trustHeader {
				info.id = sent
			} else {
				info.client = sent
			}
		}
		if info.id == "" {
			info.id = newRequestID()
		}
		info.idHeader[0] = info.id
		w.Header()["X-Request-Id"] = info.idHeader[:] // Set would canonicalise the constant, and allocate
		var ctx context.Context
		if timeout > 0 {
			// The deadline lives in the request's info and carries it as its value: one
			// allocation for the info, its deadline and the context that finds them.
			info.deadline = lazyDeadline{Context: r.Context(), deadline: info.start.Add(timeout), info: info}
			defer info.deadline.stop()
			ctx = &info.deadline
		} else {
			ctx = context.WithValue(r.Context(), requestInfoKey{}, info)
		}
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// newRequestID returns 96 random bits in hex. An id needs to be unique, not secret, so it comes from
// the runtime's fast generator (ChaCha8, seeded from the system) rather than crypto/rand, whose
// system call was visible in a profile of every request.
func newRequestID() string {
	var b [12]byte
	binary.LittleEndian.PutUint64(b[:8], rand.Uint64())
	binary.LittleEndian.PutUint32(b[8:], rand.Uint32())
	return hex.EncodeToString(b[:])
}

// isSafeRequestID accepts ids that cannot forge log lines or headers: short, letters, digits, -_.
func isSafeRequestID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for _, c := range []byte(id) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// statusRecorder remembers the status and size of a response, and so whether it has begun: the
// access log and the final error handler each keep their own.
type statusRecorder struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (s *statusRecorder) WriteHeader(status int) {
	if s.status == 0 {
		s.status = status
	}
	s.ResponseWriter.WriteHeader(status)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	n, err := s.ResponseWriter.Write(b)
	s.bytes += int64(n)
	return n, err
}

// Flush is needed by streaming RPCs (reflection, watches); FlushError is what
// http.ResponseController calls, so that a stream learns of a failed flush; Unwrap lets it reach
// the connection's own writer.
func (s *statusRecorder) Flush() { s.FlushError() }

func (s *statusRecorder) FlushError() error {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return http.NewResponseController(s.ResponseWriter).Flush()
}

func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// withRecover is the final error handler: a panic anywhere below it is logged with its stack and the
// request id and answered with a fixed internal error, in the request's own protocol. Whether the
// answer has begun it learns from a recorder that sees every write, so that no wrapper added above
// it can hide a begun answer and have an error glued onto a 200: the observer's, when it is handed
// that recorder itself (nothing between them then), else a recorder of its own.
func withRecover(logger *slog.Logger, errs *errorWriter, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec, ok := w.(*statusRecorder)
		if !ok {
			rec = &statusRecorder{ResponseWriter: w}
		}
		defer func() {
			p := recover()
			if p == nil {
				return
			}
			if p == http.ErrAbortHandler {
				panic(p) // net/http's way of aborting a response on purpose
			}
			fault := fmt.Errorf("panic: %v\n%s", p, debug.Stack())
			if rec.status != 0 {
				logger.ErrorContext(r.Context(), "panic after the response began", "error", fault)
				panic(http.ErrAbortHandler) // too late for an error answer: cut the response off
			}
			errs.write(w, r, fault) // logs the fault and answers with the fixed internal error
		}()
		next.ServeHTTP(rec, r)
	})
}

// withBodyLimit caps every request body: a REST handler that reads past the cap answers 413. On an
// RPC, connect caps each message (connect.WithReadMaxBytes and the bounded gzip), so that the limit
// means the same message on every protocol, whatever the envelope around it; the cap on the body
// as a whole (rpcBodyLimit) only bounds what connect would read and throw away after a message over
// the limit. A body that cannot be read for another reason (it ends before its Content-Length, or
// its chunks are malformed) is the client's error, not a fault.
func withBodyLimit(routes *routeTable, limit int64, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != http.NoBody { // net/http's body of a request without one: nothing to cap
			bodyLimit := limit
			if routes.isRPCPath(r.URL.Path) {
				bodyLimit = rpcBodyLimit(limit, routes.clientStreams[r.URL.Path])
			}
			r.Body = unreadableBodyIsInvalid{http.MaxBytesReader(w, r.Body, bodyLimit)}
		}
		next.ServeHTTP(w, r)
	})
}

// envelopeSize is the prefix of each message of gRPC, gRPC-Web and Connect's streams: a flags byte
// and the message's length.
const envelopeSize = 5

// clientStreamMessages is how many messages of the largest size a client stream's body may hold:
// the one public client stream, reflection, sends a few small requests per session.
const clientStreamMessages = 16

// rpcBodyLimit is the cap on an RPC's whole body, for messages of at most limit bytes: one message
// in its envelope, or clientStreamMessages of them when the client streams. Without it connect
// reads to its end a body whose message is over the limit (on a stream, up to the length its
// envelope claims), which a client could make gigabytes long.
func rpcBodyLimit(limit int64, clientStream bool) int64 {
	if clientStream {
		return clientStreamMessages * (limit + envelopeSize)
	}
	return limit + envelopeSize
}

// withConnectGETChecks refuses a Connect GET whose base64 message does not decode, as
// invalid_argument: connect-go v1.21.1 answers it unknown (500), as it does any message it cannot read.
func withConnectGETChecks(routes *routeTable, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A Connect GET carries its message in the query, so a GET without one (every REST read of
		// a user) is not looked at further.
		if r.Method == http.MethodGet && r.URL.RawQuery != "" && routes.isRPC(r) {
			query := r.URL.Query()
			if message := query.Get("message"); query.Get("base64") == "1" && !isURLBase64(message) {
				routes.errs.write(w, r, users.InvalidField("message", "the message parameter is not URL-safe base64"))
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// isURLBase64 reports whether s decodes as URL-safe base64, padded or not, as connect reads it.
func isURLBase64(s string) bool {
	encoding := base64.URLEncoding
	if len(s)%4 != 0 {
		encoding = base64.RawURLEncoding
	}
	_, err := encoding.DecodeString(s)
	return err == nil
}

// unreadableBodyIsInvalid turns a failure to read the request body into invalid_argument (400 on
// REST), which connect passes through as it is, instead of the unknown (500) it makes of any other
// read error. The end of the body and the size limit keep their own meaning.
type unreadableBodyIsInvalid struct{ io.ReadCloser }

func (b unreadableBodyIsInvalid) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	var tooLarge *http.MaxBytesError
	if err != nil && err != io.EOF && !errors.As(err, &tooLarge) {
		// A connect error, for connect's own reading of the body passes it on as it is; with the
		// details the service's errors carry.
		invalid := users.InvalidField("body", "the request body could not be read: %v", err)
		err = apierror.WithDetails(connect.NewError(connect.CodeInvalidArgument, invalid), invalid)
	}
	return n, err
}

// withChunkedRequestsClosing closes an HTTP/1.1 connection after answering a request whose body came
// with a Transfer-Encoding. RFC 9112 section 6.1 says a request with both Transfer-Encoding and
// Content-Length must not leave its connection open, since the two framings are how a request is
// smuggled past a proxy that reads the other one; net/http serves such a request by its
// Transfer-Encoding and deletes the Content-Length before any handler runs, so every such request
// is treated alike. An obs-folded Transfer-Encoding, which net/http unfolds, is covered too.
// Clients of a JSON API send Content-Length; the cost is one reconnection after a chunked body.
func withChunkedRequestsClosing(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor == 1 && len(r.TransferEncoding) > 0 {
			w.Header().Set("Connection", "close")
		}
		next.ServeHTTP(w, r)
	})
}
