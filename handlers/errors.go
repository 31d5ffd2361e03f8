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

// httpError is a client error that exists only on REST (wrong media type, body too large), where
// no Connect code has the right HTTP status.
type httpError struct {
	status  int
	message string
}

func (e *httpError) Error() string { return e.message }

// connectError is the same error for an RPC client.
func (e *httpError) connectError() *connect.Error {
	code := connect.CodeInvalidArgument
	switch e.status {
	case http.StatusRequestEntityTooLarge:
		code = connect.CodeResourceExhausted
	case http.StatusMethodNotAllowed:
		code = connect.CodeUnimplemented
	}
	return connect.NewError(code, errors.New(e.message))
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

// isRPC reports whether r is addressed to an RPC service.
func (ew *errorWriter) isRPC(r *http.Request) bool {
	for _, prefix := range ew.rpcPrefixes {
		if strings.HasPrefix(r.URL.Path, prefix) {
			return true
		}
	}
	return false
}

// write answers r with err: in the RPC protocol the request speaks, or as REST JSON.
func (ew *errorWriter) write(w http.ResponseWriter, r *http.Request, err error) {
	rpc := ew.isRPC(r)
	var he *httpError
	if errors.As(err, &he) {
		if !rpc {
			writeErrorJSON(w, he.status, he.message)
			return
		}
		err = he.connectError()
	}
	ce := publicError(r.Context(), ew.logger, err)
	if rpc {
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
	body, _ := json.Marshal(struct {
		Error string `json:"error"`
	}{message}) // a struct of one string always encodes
	writeJSONBytes(w, status, body)
}

// sanitizeErrors is the RPC side of the final error handler: it passes every error an RPC returns
// through publicError, so that no internal detail reaches a client on any protocol.
func sanitizeErrors(logger *slog.Logger) connect.UnaryInterceptorFunc {
	return func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			res, err := next(ctx, req)
			if err != nil {
				return nil, publicError(ctx, logger, err)
			}
			return res, nil
		}
	}
}
