// The service's error vocabulary: every error a client may see carries an RPC code, and a reason
// where the code alone does not say what went wrong. The HTTP face decides REST statuses from them.
package users

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"connectrpc.com/connect"

	"usersd/store"
)

// Reason says what went wrong, as AIP-193's ErrorInfo.reason does: every RPC error carries one in
// a google.rpc.ErrorInfo (domain "usersd"), and every REST error body in "reason". Where several
// failures share one code, REST answers some of them with statuses of their own (412, 422, 410).
// A reason is a constant of the contract: clients branch on it, so it never changes once served.
type Reason string

const (
	// ReasonNone is the reason of an error whose code says it all: the client sees the code's
	// own reason (see CodeReason).
	ReasonNone Reason = ""
	// ReasonInvalidField: a field of the request (or a header or parameter standing for one) breaks
	// a rule; the error names it, and a google.rpc.BadRequest carries it as a field violation.
	ReasonInvalidField Reason = "INVALID_FIELD"
	// ReasonUserNotFound: the user (or the user that owns a post) does not exist; the error's
	// metadata names its id.
	ReasonUserNotFound Reason = "USER_NOT_FOUND"
	// ReasonEtagMismatch: a write's etag precondition failed; nothing was written.
	ReasonEtagMismatch Reason = "ETAG_MISMATCH"
	// ReasonRequestInProgress: a request with the same idempotency key is still running.
	ReasonRequestInProgress Reason = "REQUEST_IN_PROGRESS"
	// ReasonRequestMismatch: the idempotency key was used before with another request.
	ReasonRequestMismatch Reason = "REQUEST_MISMATCH"
	// ReasonAlreadyExists: another user already holds the value of a unique field (user_name,
	// email, external_id); the error's metadata names the field.
	ReasonAlreadyExists Reason = "ALREADY_EXISTS"
	// ReasonChangesNotKept: a watch's resume point is older than the kept changes, or newer than
	// any change; the client must reload.
	ReasonChangesNotKept Reason = "CHANGES_NOT_KEPT"
	// ReasonWebhookNotFound: no webhook subscription has the id.
	ReasonWebhookNotFound Reason = "WEBHOOK_NOT_FOUND"
)

// Error is an error of the service that its client may see: an RPC code, a reason where the code
// is shared, and a message for the client. Faults are not Errors: any other error is internal, and
// the final error handler hides it.
type Error struct {
	code    connect.Code
	reason  Reason
	message string
	field   string // the field an invalid argument names; "" for any other error
	id      int32  // the user a not-found error names; 0 if none
	cause   error  // what the message stands for, for the log; may be nil
}

// NewError returns an Error with the code, reason and message.
func NewError(code connect.Code, reason Reason, format string, args ...any) *Error {
	return &Error{code: code, reason: reason, message: messageOf(format, args...)}
}

// messageOf is the error's message, always valid UTF-8: it may quote what a client sent, and the
// details that carry it (google.rpc.BadRequest, a protobuf string) cannot hold invalid UTF-8, so
// an invalid byte would cost the client the details of the error.
func messageOf(format string, args ...any) string {
	return strings.ToValidUTF8(fmt.Sprintf(format, args...), "\uFFFD")
}

func (e *Error) Error() string { return e.message }

// Code is the RPC code the client gets.
func (e *Error) Code() connect.Code { return e.code }

// Reason is what went wrong: the error's own reason, or its code's (CodeReason).
func (e *Error) Reason() Reason {
	if e.reason == ReasonNone {
		return CodeReason(e.code)
	}
	return e.reason
}

// Field is the request field (or the header or parameter that stands for one) whose value an
// invalid argument refuses, or whose value another user already holds, as the client names it; ""
// for every other error.
func (e *Error) Field() string { return e.field }

// Metadata is what the error names, for ErrorInfo.metadata: the field of an invalid argument
// ("field"), the user that was not found ("id"); nil if it names nothing.
func (e *Error) Metadata() map[string]string {
	switch {
	case e.field != "":
		return map[string]string{"field": e.field}
	case e.id != 0:
		return map[string]string{"id": strconv.FormatInt(int64(e.id), 10)}
	}
	return nil
}

// CodeReason is the reason of an error whose code says it all: the code's own name, in the upper
// snake case of the reasons (NOT_FOUND, UNAUTHENTICATED, ...).
func CodeReason(code connect.Code) Reason {
	return Reason(strings.ToUpper(code.String()))
}

// Unwrap returns the error the message stands for, if any.
func (e *Error) Unwrap() error { return e.cause }

// InvalidField is the error of every bad input: field names what the client sent (a field of the
// request, or the header or parameter that stands for one) and the message says what is wrong
// with it, naming it too, so that a client that reads only the message still knows.
func InvalidField(field, format string, args ...any) *Error {
	return &Error{code: connect.CodeInvalidArgument, reason: ReasonInvalidField, field: field, message: messageOf(format, args...)}
}

// AlreadyExists is the error of a write that would give a user the value of a unique field that
// another user holds: field names it as the client does, and nothing was written.
func AlreadyExists(field, format string, args ...any) *Error {
	return &Error{code: connect.CodeAlreadyExists, reason: ReasonAlreadyExists, field: field, message: messageOf(format, args...)}
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
		e := codeError(connect.CodeNotFound, err)
		e.reason = ReasonUserNotFound
		var missing store.UserNotFound
		if errors.As(err, &missing) {
			e.id = missing.ID
		}
		return e
	case errors.Is(err, store.ErrAlreadyExists):
		var taken store.Taken
		errors.As(err, &taken)
		e := AlreadyExists(taken.Field, "another user already has this %s; %s must be unique", taken.Field, taken.Field)
		e.cause = err
		return e
	case errors.Is(err, store.ErrTooManyLabels):
		e := InvalidField("labels", "labels: the change would leave the user with more than %d labels", store.MaxLabels)
		e.cause = err
		return e
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

// FromStore maps a store error to the client error it stands for, for the rules of other resources
// than users (webhook subscriptions), which share the store's failures: unavailable, canceled, too
// slow. Their own missing records they map themselves.
func FromStore(err error) error { return fromStore(err) }
