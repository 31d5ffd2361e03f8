package apierror

import (
	"context"
	"errors"
	"io"
	"log/slog"

	"connectrpc.com/connect"
)

// Sanitize is the RPC side of the final error handler: it passes every error an RPC returns,
// unary or streaming, through Public, so that no internal detail reaches a client on any
// protocol.
type Sanitize struct{ Logger *slog.Logger }

func (s Sanitize) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		res, err := next(ctx, req)
		if err != nil {
			return nil, Public(ctx, s.Logger, err)
		}
		return res, nil
	}
}

func (s Sanitize) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (s Sanitize) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		if err := next(ctx, markReceiveErrors{conn}); err != nil {
			return Public(ctx, s.Logger, err)
		}
		return nil
	}
}

// markReceiveErrors marks the errors of reading the stream's messages, which connect-go makes, so
// that Public can tell them from the *connect.Errors that a handler makes and passes as made.
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
