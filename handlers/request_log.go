// Log lines of a request carry its id, whoever logs them.
package handlers

import (
	"context"
	"log/slog"
)

// logWithRequestIDs makes every line logged with a request's context carry the request's id, so
// that no caller has to add it (the service's own lines included).
func logWithRequestIDs(h slog.Handler) slog.Handler { return requestIDLogHandler{h} }

type requestIDLogHandler struct{ slog.Handler }

func (h requestIDLogHandler) Handle(ctx context.Context, record slog.Record) error {
	if id := requestID(ctx); id != "" {
		record.AddAttrs(slog.String("request_id", id))
	}
	return h.Handler.Handle(ctx, record)
}

func (h requestIDLogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return requestIDLogHandler{h.Handler.WithAttrs(attrs)}
}

func (h requestIDLogHandler) WithGroup(name string) slog.Handler {
	return requestIDLogHandler{h.Handler.WithGroup(name)}
}
