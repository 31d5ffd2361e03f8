// The service's error vocabulary: every error a client may see carries an RPC code, and a reason
// where the code alone does not say what went wrong. The HTTP face decides REST statuses from them.
package users

import (
	"context"
	"errors"
	"fmt"

	"connectrpc.com/connect"

	"usersd/store"
)

// Reason says what went wrong where several failures share one code, in the manner of AIP-193's
// ErrorInfo.reason. REST answers them with statuses of their own (412, 422, 410); RPC clients see
// the code.
type Reason string

const (
	// ReasonNone is the reason of an error whose code says it all.
	ReasonNone Reason = ""
	// ReasonEtagMismatch: a write's etag precondition failed; nothing was written.
	ReasonEtagMismatch Reason = "ETAG_MISMATCH"
	// ReasonRequestInProgress: a request with the same idempotency key is still running.
	ReasonRequestInProgress Reason = "REQUEST_IN_PROGRESS"
	// ReasonRequestMismatch: the idempotency key was used before with another request.
	ReasonRequestMismatch Reason = "REQUEST_MISMATCH"
	// ReasonChangesNotKept: a watch's resume point is older than the kept changes, or newer than
	// any change; the client must reload.
	ReasonChangesNotKept Reason = "CHANGES_NOT_KEPT"
)

// Error is an error of the service that its client may see: an RPC code, a reason where the code
// is shared, and a message for the client. Faults are not Errors: any other error is internal, and
// the final error handler hides it.
type Error struct {
	code    connect.Code
	reason  Reason
	message string
	cause   error // what the message stands for, for the log; may be nil
}

// NewError returns an Error with the code, reason and message.
func NewError(code connect.Code, reason Reason, format string, args ...any) *Error {
	return &Error{code: code, reason: reason, message: fmt.Sprintf(format, args...)}
}

func (e *Error) Error() string { return e.message }

// Code is the RPC code the client gets.
func (e *Error) Code() connect.Code { return e.code }

// Reason is what went wrong where the code is shared; ReasonNone otherwise.
func (e *Error) Reason() Reason { return e.reason }

// Unwrap returns the error the message stands for, if any.
func (e *Error) Unwrap() error { return e.cause }

// invalidArgument is the error of every bad input.
func invalidArgument(format string, args ...any) error {
	return NewError(connect.CodeInvalidArgument, ReasonNone, format, args...)
}

// codeError is an Error whose message is its cause's.
func codeError(code connect.Code, cause error) *Error {
	return &Error{code: code, message: cause.Error(), cause: cause}
}

// fromStore maps a store error to the client error it stands for. Errors with no meaning for the
// client pass through unchanged and become internal errors at the final error handler.
func fromStore(err error) error {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return codeError(connect.CodeNotFound, err)
	case errors.Is(err, store.ErrVersionMismatch):
		return errEtagMismatch
	case errors.Is(err, store.ErrRequestInProgress):
		return NewError(connect.CodeAborted, ReasonRequestInProgress,
			"a request with this idempotency key is still in progress; retry it later")
	case errors.Is(err, store.ErrRequestMismatch):
		return NewError(connect.CodeFailedPrecondition, ReasonRequestMismatch,
			"this idempotency key was already used with a different request; use a new key for a new request")
	case errors.Is(err, store.ErrUnavailable):
		return codeError(connect.CodeUnavailable, err) // the final error handler logs it, and hides it
	case errors.Is(err, context.Canceled):
		return NewError(connect.CodeCanceled, ReasonNone, "the request was canceled")
	case errors.Is(err, context.DeadlineExceeded):
		return NewError(connect.CodeDeadlineExceeded, ReasonNone, "the request took too long")
	}
	return err
}

// errEtagMismatch is the answer to a write whose etag precondition failed in the store.
var errEtagMismatch = NewError(connect.CodeAborted, ReasonEtagMismatch,
	"the user has changed since the etag you sent was read; read it again and retry")
