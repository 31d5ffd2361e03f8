// Starting before the database answers. A PostgreSQL that is down or still starting when usersd
// starts (a whole stack brought up at once, a database restarted with its clients) is waited for,
// within -db-wait, while the server already answers its probes: /livez 200, /readyz 503.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"usersd/store"
	"usersd/store/sqlstore"
)

const (
	// dbRetryFirst and dbRetryMost bound the wait between attempts to open the database; it
	// doubles after each failure.
	dbRetryFirst = 500 * time.Millisecond
	dbRetryMost  = 10 * time.Second
)

// openWhenReady opens the store, trying again while the database does not answer (the error
// wraps store.ErrUnavailable: a refused or timed-out connection, not a wrong password or a missing
// database), for at most wait, logging each failure. Before its first wait it calls waiting, which
// starts the server early; an error of waiting ends the start.
func openWhenReady(ctx context.Context, dsn string, opts []sqlstore.Option, wait time.Duration, logger *slog.Logger,
	waiting func() error) (*sqlstore.Store, error) {
	start := time.Now()
	deadline := start.Add(wait)
	retry := dbRetryFirst
	for attempt := 1; ; attempt++ {
		st, err := sqlstore.Open(ctx, dsn, opts...)
		if err == nil {
			logger.Info("database ready", "attempts", attempt, "waited", time.Since(start).Round(time.Millisecond).String())
			return st, nil
		}
		if errors.Is(err, sqlstore.ErrStartupParameterRefused) {
			return nil, fmt.Errorf("%w. This is a pooler in transaction mode: set -db-direct (USERS_DB_DIRECT) to a URL of the same database on PostgreSQL itself, "+
				"which then takes the session limits, the migrations and LISTEN (docs/POSTGRESQL.md, Through a pooler)", err)
		}
		if !errors.Is(err, store.ErrUnavailable) || ctx.Err() != nil {
			return nil, err
		}
		if attempt == 1 {
			if err := waiting(); err != nil {
				return nil, err
			}
		}
		remaining := time.Until(deadline)
		if remaining <= 0 {
			return nil, fmt.Errorf("the database did not answer within %s (-db-wait): %w", wait, err)
		}
		pause := min(retry, remaining)
		logger.Warn("waiting for the database", "attempt", attempt, "retry_in", pause.String(), "error", err.Error())
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(pause):
		}
		retry = min(2*retry, dbRetryMost)
	}
}

// handlerSwitch serves the handler last given to use: the starting one while the database is
// awaited, then the service. Only a server that started before its database uses one.
type handlerSwitch struct{ current atomic.Pointer[http.Handler] }

func newHandlerSwitch(h http.Handler) *handlerSwitch {
	s := &handlerSwitch{}
	s.use(h)
	return s
}

func (s *handlerSwitch) use(h http.Handler) { s.current.Store(&h) }

func (s *handlerSwitch) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	(*s.current.Load()).ServeHTTP(w, r)
}
