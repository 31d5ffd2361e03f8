// The error writer: any error becomes what a client may see (a REST status and {"error": ...}, or
// the RPC protocol's own error), and faults are logged and hidden. The service's errors
// (*users.Error) carry an RPC code and, where codes are shared, a reason; REST statuses are
// decided here, from them.
package handlers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"

	"connectrpc.com/connect"

	"usersd/scim"
	"usersd/store"
	"usersd/users"
)

// internalErrorMessage is the only text a client ever sees of a fault; the detail goes to the log.
const internalErrorMessage = "Internal Server Error"

// httpError is a client error of HTTP itself, whose REST status no RPC code stands for: a media
// type, a body size or a method that is not allowed.
type httpError struct {
	status  int          // the REST answer
	code    connect.Code // what an RPC client gets instead
	reason  users.Reason // what went wrong (the ErrorInfo and REST "reason"); ReasonNone: the code's
	field   string       // the header a bad input names, if any: its ErrorInfo metadata and BadRequest
	message string
}

func (e *httpError) Error() string { return e.message }

func newHTTPError(status int, code connect.Code, reason users.Reason, format string, args ...any) *httpError {
	return &httpError{status: status, code: code, reason: reason, message: fmt.Sprintf(format, args...)}
}

// unsupportedMediaType is the 415 of a body whose Content-Type the route does not take.
func unsupportedMediaType(format string, args ...any) *httpError {
	e := newHTTPError(http.StatusUnsupportedMediaType, connect.CodeInvalidArgument, reasonUnsupportedMediaType, format, args...)
	e.field = "Content-Type"
	return e
}

// The reasons of the errors of HTTP itself (see users.Reason): where one code stands for several
// failures, the reason says which.
const (
	reasonUnsupportedMediaType users.Reason = "UNSUPPORTED_MEDIA_TYPE"
	reasonBodyTooLarge         users.Reason = "BODY_TOO_LARGE"
	reasonMethodNotAllowed     users.Reason = "METHOD_NOT_ALLOWED"
	reasonRateLimited          users.Reason = "RATE_LIMITED"
	reasonTooManyWatchers      users.Reason = "TOO_MANY_WATCHERS"
	reasonAnswersOverBudget    users.Reason = "ANSWERS_OVER_BUDGET"
	reasonNoRoute              users.Reason = "NO_ROUTE"
	reasonNoProcedure          users.Reason = "NO_PROCEDURE"
)

// publicError returns what the client may see of err. The service's errors (*users.Error) and
// those of HTTP itself (*httpError) get the details of their reason (withDetails). A *connect.Error
// that a handler made passes as it was made, with its details and metadata. Faults (any other
// error, and every error of code internal, unknown or data_loss) and a store that is unavailable
// are logged and replaced by a fixed message: a fault says nothing of its cause (the deliberate
// difference from the Connect conformance suite, docs/API.md#connect-conformance).
func publicError(ctx context.Context, logger *slog.Logger, err error) *connect.Error {
	var he *httpError
	var ue *users.Error
	var ce *connect.Error
	switch {
	case errors.As(err, &he):
		return withDetails(connect.NewError(he.code, errors.New(he.message)), err)
	case errors.As(err, &ue):
		ce = connect.NewError(ue.Code(), errors.New(ue.Error()))
	case !errors.As(err, &ce):
		ce = connect.NewError(connect.CodeInternal, err)
	}
	switch ce.Code() {
	case connect.CodeInternal, connect.CodeUnknown, connect.CodeDataLoss:
		logger.ErrorContext(ctx, "request failed", "error", err)
		//lint:ignore ST1005 the capitalised text is the contract's fixed answer to every fault
		return withDetails(connect.NewError(connect.CodeInternal, errors.New(internalErrorMessage)), nil)
	case connect.CodeUnavailable:
		if errors.Is(err, store.ErrUnavailable) {
			logger.WarnContext(ctx, "store unavailable", "error", err)
			return withDetails(connect.NewError(connect.CodeUnavailable, errors.New("the service is temporarily unavailable; retry later")), nil)
		}
	}
	if ue != nil {
		return withDetails(ce, err)
	}
	var received receivedError
	if errors.As(err, &received) && len(ce.Details()) == 0 {
		// connect-go's own error for a message of the stream it could not read: the details of
		// its code, as withProtocolErrorDetails gives a unary call's.
		for _, d := range errorDetailsFor(ce.Code(), ce.Message()) {
			addDetail(ce, d)
		}
	}
	return ce
}

// restStatusOf is the REST status of a client error: an error of HTTP itself has its own; a reason
// that the RPC code shares with other failures has its own; otherwise the code decides.
func restStatusOf(err error, ce *connect.Error) int {
	var he *httpError
	if errors.As(err, &he) {
		return he.status
	}
	var ue *users.Error
	if errors.As(err, &ue) && ue.Code() == ce.Code() {
		if status, ok := reasonStatus[ue.Reason()]; ok {
			return status
		}
	}
	if status, ok := restStatus[ce.Code()]; ok {
		return status
	}
	return http.StatusInternalServerError
}

// reasonStatus is the REST status of the service's reasons whose status is not their code's.
var reasonStatus = map[users.Reason]int{
	users.ReasonEtagMismatch:      http.StatusPreconditionFailed,
	users.ReasonRequestInProgress: http.StatusConflict,
	users.ReasonRequestMismatch:   http.StatusUnprocessableEntity,
	users.ReasonChangesNotKept:    http.StatusGone,
}

// restStatus maps a Connect code to the HTTP status of the REST answer; it follows connect's own
// table for the Connect protocol.
var restStatus = map[connect.Code]int{
	connect.CodeCanceled:           499, // client closed the request; it will not read the answer
	connect.CodeUnknown:            http.StatusInternalServerError,
	connect.CodeInvalidArgument:    http.StatusBadRequest,
	connect.CodeDeadlineExceeded:   http.StatusGatewayTimeout,
	connect.CodeNotFound:           http.StatusNotFound,
	connect.CodeAlreadyExists:      http.StatusConflict,
	connect.CodePermissionDenied:   http.StatusForbidden,
	connect.CodeResourceExhausted:  http.StatusTooManyRequests,
	connect.CodeFailedPrecondition: http.StatusBadRequest,
	connect.CodeAborted:            http.StatusConflict,
	connect.CodeOutOfRange:         http.StatusBadRequest,
	connect.CodeUnimplemented:      http.StatusNotImplemented,
	connect.CodeInternal:           http.StatusInternalServerError,
	connect.CodeUnavailable:        http.StatusServiceUnavailable,
	connect.CodeDataLoss:           http.StatusInternalServerError,
	connect.CodeUnauthenticated:    http.StatusUnauthorized,
}

// errorWriter writes every error response of the service, REST and RPC alike.
type errorWriter struct {
	logger *slog.Logger
	rpc    *connect.ErrorWriter
	// routes says which requests are RPCs, whose errors are written in the RPC protocol; the
	// others get REST JSON.
	routes *routeTable
}

// write answers r with err: in the RPC protocol the request speaks, or as REST JSON.
func (ew *errorWriter) write(w http.ResponseWriter, r *http.Request, err error) {
	if scim.Serves(r) {
		ew.writeSCIM(w, r, err)
		return
	}
	ce := publicError(r.Context(), ew.logger, err)
	if ew.routes.isRPC(r) {
		recordRPCCode(r.Context(), ce.Code())
		_ = ew.rpc.Write(w, r, ce) // the client has gone if this fails; nothing more to do
		return
	}
	switch ce.Code() {
	case connect.CodeUnauthenticated:
		if w.Header().Get("WWW-Authenticate") == "" { // a bearer token's refusal has its own
			w.Header().Set("WWW-Authenticate", `ApiKey header="x-api-key"`)
		}
	case connect.CodeUnavailable: // the store or the answer budget: both pass in seconds
		w.Header().Set("Retry-After", "1")
	}
	writeJSONBytes(w, restStatusOf(err, ce), errorBodyOf(ce))
}

// writeSCIM answers a SCIM request with err in SCIM's error schema: a refusal of the SCIM face's
// own as it is, any other error as the service makes it public.
func (ew *errorWriter) writeSCIM(w http.ResponseWriter, r *http.Request, err error) {
	if scim.AsError(err) != nil {
		scim.WriteError(w, err, 0, "")
		return
	}
	ce := publicError(r.Context(), ew.logger, err)
	switch ce.Code() {
	case connect.CodeUnauthenticated:
		if w.Header().Get("WWW-Authenticate") == "" { // a bearer token's refusal has its own
			w.Header().Set("WWW-Authenticate", `Bearer realm="usersd"`)
		}
	case connect.CodeUnavailable:
		w.Header().Set("Retry-After", "1")
	}
	scim.WriteError(w, err, restStatusOf(err, ce), ce.Message())
}

// writeUnavailableJSON writes the REST error body of a server that cannot answer yet: 503 with
// message, the reason UNAVAILABLE.
func writeUnavailableJSON(w http.ResponseWriter, message string) {
	writeJSONBytes(w, http.StatusServiceUnavailable, errorBodyOf(connect.NewError(connect.CodeUnavailable, errors.New(message))))
}

// sanitizeErrors is the RPC side of the final error handler: it passes every error an RPC returns,
// unary or streaming, through publicError, so that no internal detail reaches a client on any
// protocol.
type sanitizeErrors struct{ logger *slog.Logger }

func (s sanitizeErrors) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		res, err := next(ctx, req)
		if err != nil {
			return nil, publicError(ctx, s.logger, err)
		}
		return res, nil
	}
}

func (s sanitizeErrors) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (s sanitizeErrors) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		if err := next(ctx, markReceiveErrors{conn}); err != nil {
			return publicError(ctx, s.logger, err)
		}
		return nil
	}
}

// markReceiveErrors marks the errors of reading the stream's messages, which connect-go makes, so
// that publicError can tell them from the *connect.Errors that a handler makes and passes as made.
type markReceiveErrors struct{ connect.StreamingHandlerConn }

func (c markReceiveErrors) Receive(m any) error {
	err := c.StreamingHandlerConn.Receive(m)
	if err != nil && !errors.Is(err, io.EOF) {
		return receivedError{err}
	}
	return err
}

// receivedError is an error of reading a stream's message (see markReceiveErrors).
type receivedError struct{ error }

func (e receivedError) Unwrap() error { return e.error }
