// The one error vocabulary: business code returns *connect.Error; this file turns any error into what
// a client may see (REST status and {"error": ...}, or the RPC protocol's own error), and logs faults.
package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"connectrpc.com/connect"

	"usersd/store"
)

// internalErrorMessage is the only text a client ever sees of a fault; the detail goes to the log.
const internalErrorMessage = "Internal Server Error"

// httpError is a client error whose REST status is not the one restStatus gives its Connect code:
// the errors of HTTP itself (media type, body size, method, preconditions) and of idempotency keys.
type httpError struct {
	status  int          // the REST answer
	code    connect.Code // what an RPC client gets instead
	message string
}

func (e *httpError) Error() string { return e.message }

func newHTTPError(status int, code connect.Code, format string, args ...any) *httpError {
	return &httpError{status: status, code: code, message: fmt.Sprintf(format, args...)}
}

// invalidArgument is the error of every bad input.
func invalidArgument(format string, args ...any) error {
	return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf(format, args...))
}

// fromStore maps a store error to the client error it stands for. Errors with no meaning for the
// client pass through unchanged and become internal errors in publicError.
func fromStore(err error) error {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return connect.NewError(connect.CodeNotFound, err)
	case errors.Is(err, store.ErrVersionMismatch):
		return newHTTPError(http.StatusPreconditionFailed, connect.CodeAborted,
			"the user has changed since the etag you sent was read; read it again and retry")
	case errors.Is(err, store.ErrRequestInProgress):
		return newHTTPError(http.StatusConflict, connect.CodeAborted,
			"a request with this idempotency key is still in progress; retry it later")
	case errors.Is(err, store.ErrRequestMismatch):
		return newHTTPError(422, connect.CodeFailedPrecondition, // 422 Unprocessable Content
			"this idempotency key was already used with a different request; use a new key for a new request")
	case errors.Is(err, store.ErrUnavailable):
		return connect.NewError(connect.CodeUnavailable, err) // detail replaced in publicError
	case errors.Is(err, context.Canceled):
		return connect.NewError(connect.CodeCanceled, errors.New("the request was canceled"))
	case errors.Is(err, context.DeadlineExceeded):
		return connect.NewError(connect.CodeDeadlineExceeded, errors.New("the request took too long"))
	}
	return err
}

// publicError returns what the client may see of err. Faults (any error that is not a *connect.Error,
// and internal or unavailable ones) are logged with the request id and replaced by a fixed message.
func publicError(ctx context.Context, logger *slog.Logger, err error) *connect.Error {
	var he *httpError
	if errors.As(err, &he) {
		return connect.NewError(he.code, errors.New(he.message))
	}
	var ce *connect.Error
	if !errors.As(err, &ce) {
		ce = connect.NewError(connect.CodeInternal, err)
	}
	switch ce.Code() {
	case connect.CodeInternal, connect.CodeUnknown, connect.CodeDataLoss:
		logger.ErrorContext(ctx, "request failed", "request_id", requestID(ctx), "error", err)
		//lint:ignore ST1005 the capitalised text is the contract's fixed answer to every fault
		return connect.NewError(connect.CodeInternal, errors.New(internalErrorMessage))
	case connect.CodeUnavailable:
		logger.WarnContext(ctx, "store unavailable", "request_id", requestID(ctx), "error", err)
		return connect.NewError(connect.CodeUnavailable, errors.New("the service is temporarily unavailable; retry later"))
	}
	return ce
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
	// rpcPrefixes are the paths under which RPC services are mounted (recorded by addRoutes as it
	// mounts them). Errors there are written in the RPC protocol, elsewhere as REST JSON: both kinds
	// of request may be POSTs of application/json, so only the path tells them apart.
	rpcPrefixes []string
}

// isRPC reports whether r is addressed to an RPC service: it is under a mounted service's path, or
// it speaks gRPC or gRPC-Web (content types REST never uses), or it says it speaks Connect.
func (ew *errorWriter) isRPC(r *http.Request) bool {
	return strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc") || r.Header.Get("Connect-Protocol-Version") != "" ||
		ew.underRPCPath(r.URL.Path)
}

// underRPCPath reports whether path is under a mounted RPC service's path.
func (ew *errorWriter) underRPCPath(path string) bool {
	for _, prefix := range ew.rpcPrefixes {
		if strings.HasPrefix(path, prefix) {
			return true
		}
	}
	return false
}

// write answers r with err: in the RPC protocol the request speaks, or as REST JSON.
func (ew *errorWriter) write(w http.ResponseWriter, r *http.Request, err error) {
	var he *httpError
	rpc := ew.isRPC(r)
	if !rpc && errors.As(err, &he) {
		writeErrorJSON(w, he.status, he.message)
		return
	}
	ce := publicError(r.Context(), ew.logger, err)
	if rpc {
		recordRPCCode(r.Context(), ce.Code())
		_ = ew.rpc.Write(w, r, ce) // the client has gone if this fails; nothing more to do
		return
	}
	if ce.Code() == connect.CodeUnauthenticated {
		w.Header().Set("WWW-Authenticate", `ApiKey header="x-api-key"`)
	}
	status, ok := restStatus[ce.Code()]
	if !ok {
		status = http.StatusInternalServerError
	}
	writeErrorJSON(w, status, ce.Message())
}

// writeErrorJSON writes the REST error body {"error": message}.
func writeErrorJSON(w http.ResponseWriter, status int, message string) {
	writeJSONBytes(w, status, errorBody(message))
}

// errorBody is the REST error body {"error": message}, also the data of an SSE "error" event.
func errorBody(message string) []byte {
	body, _ := json.Marshal(struct {
		Error string `json:"error"`
	}{message}) // a struct of one string always encodes
	return body
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
		if err := next(ctx, conn); err != nil {
			return publicError(ctx, s.logger, err)
		}
		return nil
	}
}
