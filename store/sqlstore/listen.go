// On PostgreSQL, word of a change that another replica commits comes by NOTIFY: the change log's
// trigger (migration 0008) notifies channel usersd_user_events at commit, and while anyone in this
// process waits for notices, one connection of its own LISTENs on that channel. The notice is only
// a wake-up: the log is the truth, and a reader that misses a notice (the connection was down)
// finds the change at its next read.
package sqlstore

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
)

const (
	// eventsChannel is the channel that the trigger notifies.
	eventsChannel = "usersd_user_events"
	// listenRetryFirst and listenRetryMost bound the wait before connecting again after the
	// listening connection failed; it doubles after each failure in a row.
	listenRetryFirst = 100 * time.Millisecond
	listenRetryMost  = 10 * time.Second
)

// listenConfig is the configuration of the listening connection: the pool's, named, unless the URL
// names its connections already, so that an operator who lists the server's connections
// (pg_stat_activity) sees what it is for.
func listenConfig(dsn string) (*pgx.ConnConfig, error) {
	config, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	if _, named := config.RuntimeParams["application_name"]; !named {
		config.RuntimeParams["application_name"] = "usersd change listener"
	}
	return config, nil
}

// listenForChanges calls notify for every notice on eventsChannel until ctx ends, connecting
// again, after a jittered backoff, whenever the connection fails.
func listenForChanges(ctx context.Context, config *pgx.ConnConfig, notify func()) {
	retry := listenRetryFirst
	for {
		listened := listenUntilFailure(ctx, config, notify)
		if ctx.Err() != nil {
			return
		}
		if listened {
			retry = listenRetryFirst
		}
		// Full jitter, so that replicas cut off together by a failover do not reconnect together.
		select {
		case <-ctx.Done():
			return
		case <-time.After(rand.N(retry) + time.Millisecond):
		}
		retry = min(2*retry, listenRetryMost)
	}
}

// listenUntilFailure connects, listens and calls notify for each notice until the connection
// fails or ctx ends. It reports whether it got as far as listening.
func listenUntilFailure(ctx context.Context, config *pgx.ConnConfig, notify func()) (listened bool) {
	conn, err := pgx.ConnectConfig(ctx, config)
	if err != nil {
		return false
	}
	defer func() {
		closing, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		conn.Close(closing)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+eventsChannel); err != nil {
		return false
	}
	// Changes committed while no connection listened sent notices that nobody received.
	notify()
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return true
		}
		notify()
	}
}
