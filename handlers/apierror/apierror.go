// Package apierror decides what a client may see of an error, on every protocol usersd speaks: the
// public form of any error (a fault is logged and hidden behind a fixed message), its REST status
// and body, the details every error carries (an ErrorInfo with its reason and, for a bad input, a
// BadRequest naming the field), and the same details on the errors that connect-go answers by
// itself. The service's errors (*users.Error) carry an RPC code and, where codes are shared, a
// reason; the errors of HTTP itself (*HTTPError) carry their own status. Which requests are RPCs,
// and whether an error is answered as REST JSON, an RPC error or SCIM's, are package handlers'.
package apierror

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"connectrpc.com/connect"

	"usersd/store"
	"usersd/users"
)

// InternalMessage is the only text a client ever sees of a fault; the detail goes to the log.
const InternalMessage = "Internal Server Error"

// HTTPError is a client error of HTTP itself, whose REST status no RPC code stands for: a media
// type, a body size or a method that is not allowed.
type HTTPError struct {
	status  int          // the REST answer
	code    connect.Code // what an RPC client gets instead
	reason  users.Reason // what went wrong (the ErrorInfo and REST "reason"); ReasonNone: the code's
	field   string       // the header a bad input names, if any: its ErrorInfo metadata and BadRequest
	message string
}

func (e *HTTPError) Error() string { return e.message }

// New is an error of HTTP itself: status on REST, code with reason on RPC.
func New(status int, code connect.Code, reason users.Reason, format string, args ...any) *HTTPError {
	return &HTTPError{status: status, code: code, reason: reason, message: fmt.Sprintf(format, args...)}
}

// UnsupportedMediaType is the 415 of a body whose Content-Type the route does not take.
func UnsupportedMediaType(format string, args ...any) *HTTPError {
	e := New(http.StatusUnsupportedMediaType, connect.CodeInvalidArgument, ReasonUnsupportedMediaType, format, args...)
	e.field = "Content-Type"
	return e
}

// The reasons of the errors of HTTP itself (see users.Reason): where one code stands for several
// failures, the reason says which.
const (
	ReasonUnsupportedMediaType users.Reason = "UNSUPPORTED_MEDIA_TYPE"
	ReasonBodyTooLarge         users.Reason = "BODY_TOO_LARGE"
	ReasonMethodNotAllowed     users.Reason = "METHOD_NOT_ALLOWED"
	ReasonRateLimited          users.Reason = "RATE_LIMITED"
	ReasonTooManyWatchers      users.Reason = "TOO_MANY_WATCHERS"
	ReasonAnswersOverBudget    users.Reason = "ANSWERS_OVER_BUDGET"
	ReasonNoRoute              users.Reason = "NO_ROUTE"
	ReasonNoProcedure          users.Reason = "NO_PROCEDURE"
)

// Public returns what the client may see of err. The service's errors (*users.Error) and
// those of HTTP itself (*HTTPError) get the details of their reason (WithDetails). A *connect.Error
// that a handler made passes as it was made, with its details and metadata. Faults (any other
// error, and every error of code internal, unknown or data_loss) and a store that is unavailable
// are logged and replaced by a fixed message: a fault says nothing of its cause (the deliberate
// difference from the Connect conformance suite, docs/API.md#connect-conformance).
func Public(ctx context.Context, logger *slog.Logger, err error) *connect.Error {
	var he *HTTPError
	var ue *users.Error
	var ce *connect.Error
	switch {
	case errors.As(err, &he):
		return WithDetails(connect.NewError(he.code, errors.New(he.message)), err)
	case errors.As(err, &ue):
		ce = connect.NewError(ue.Code(), errors.New(ue.Error()))
	case !errors.As(err, &ce):
		ce = connect.NewError(connect.CodeInternal, err)
	}
	switch ce.Code() {
	case connect.CodeInternal, connect.CodeUnknown, connect.CodeDataLoss:
		logger.ErrorContext(ctx, "request failed", "error", err)
		//lint:ignore ST1005 the capitalised text is the contract's fixed answer to every fault
		return WithDetails(connect.NewError(connect.CodeInternal, errors.New(InternalMessage)), nil)
	case connect.CodeUnavailable:
		if errors.Is(err, store.ErrUnavailable) {
			logger.WarnContext(ctx, "store unavailable", "error", err)
			return WithDetails(connect.NewError(connect.CodeUnavailable, errors.New("the service is temporarily unavailable; retry later")), nil)
		}
	}
	if ue != nil {
		return WithDetails(ce, err)
	}
	var received receivedError
	if errors.As(err, &received) && len(ce.Details()) == 0 {
		// connect-go's own error for a message of the stream it could not read: the details of
		// its code, as WithProtocolDetails gives a unary call's.
		for _, d := range errorDetailsFor(ce.Code(), ce.Message()) {
			addDetail(ce, d)
		}
	}
	return ce
}

// RESTStatus is the REST status of a client error: an error of HTTP itself has its own; a reason
// that the RPC code shares with other failures has its own; otherwise the code decides.
func RESTStatus(err error, ce *connect.Error) int {
	var he *HTTPError
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
