// On PostgreSQL, word of a change that another replica commits comes by NOTIFY: the change log's
// trigger (migrations 0008 and 0009) notifies channel usersd_user_events at commit, with the
// schema of the change, and while anyone in this process waits for notices, one connection of its
// own LISTENs on that channel and keeps the notices of its own schema. The notice is only
// a wake-up: the log is the truth, and a reader that misses a notice (the connection was down)
// finds the change at its next read.
package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
)

const (
	// eventsChannel is the channel that the trigger notifies.
	eventsChannel = "usersd_user_events"
	// listenRetryFirst and listenRetryMost bound the wait before connecting again after the
	// listening connection failed; it doubles after each failure, and starts again from the first
	// only after a connection that lasted listenSettled, so that a connection cut again and again
	// just after it listens does not bring a reconnect every few milliseconds.
	listenRetryFirst = 100 * time.Millisecond
	listenRetryMost  = 10 * time.Second
	listenSettled    = 30 * time.Second
	// listenConnectTimeout bounds a connection attempt when the URL sets no connect_timeout: a
	// server that does not answer at all would otherwise hold an attempt for minutes.
	listenConnectTimeout = 10 * time.Second
	// listenProbeEvery and listenProbeTimeout find a listening connection that went silent: after
	// this long without a notice it is pinged, and one that does not answer in time is replaced.
	// TCP keepalives cannot find it when something on the way (a proxy, a NAT) still answers for
	// a server that is gone, and a listening connection sends nothing that would fail.
	listenProbeEvery   = 10 * time.Second
	listenProbeTimeout = 5 * time.Second
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
	if config.ConnectTimeout == 0 {
		config.ConnectTimeout = listenConnectTimeout
	}
	setSessionLimits(config, false) // the direct URL, or a -db that goes through no pooler
	return config, nil
}

// listenForChanges calls notify for every notice on eventsChannel until ctx ends, connecting
// again, after a jittered backoff, whenever the connection fails. It logs the first failure of a
// run of them and the recovery, not every attempt.
func listenForChanges(ctx context.Context, config *pgx.ConnConfig, notify func(), logger *slog.Logger) {
	retry := listenRetryFirst
	failing := false
	for {
		connected := time.Now()
		err := listenUntilFailure(ctx, config, notify, func() {
			if failing {
				logger.Info("listening for other replicas' changes again")
				failing = false
			}
		})
		if ctx.Err() != nil {
			return
		}
		if !failing {
			logger.Warn("not listening for other replicas' changes: watches see them by polling, within a second, until the connection is back",
				"error", err)
			failing = true
		}
		if time.Since(connected) >= listenSettled {
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

// listenUntilFailure connects, listens, calls listening, and then notify for each notice, until
// the connection fails or ctx ends; it returns why it stopped.
func listenUntilFailure(ctx context.Context, config *pgx.ConnConfig, notify, listening func()) error {
	conn, err := pgx.ConnectConfig(ctx, config)
	if err != nil {
		return err
	}
	defer func() {
		closing, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		conn.Close(closing)
		// A statement stopped by ctx has pgx cancel it in the background (see pgConns).
		select {
		case <-conn.PgConn().CleanupDone():
		case <-closing.Done():
		}
	}()
	// The channel is the database's: other deployments, in other schemas, notify it too.
	var schema string
	if err := conn.QueryRow(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+eventsChannel); err != nil {
		return err
	}
	listening()
	// Changes committed while no connection listened sent notices that nobody received.
	notify()
	for {
		waiting, cancel := context.WithTimeout(ctx, listenProbeEvery)
		notice, err := conn.WaitForNotification(waiting)
		cancel()
		switch {
		case err == nil:
			if notice.Payload == schema {
				notify()
			}
		case ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
			if err := probe(ctx, conn); err != nil {
				return err
			}
		default:
			return err
		}
	}
}

// probe pings a listening connection that has been silent, within listenProbeTimeout.
func probe(ctx context.Context, conn *pgx.Conn) error {
	ctx, cancel := context.WithTimeout(ctx, listenProbeTimeout)
	defer cancel()
	if err := conn.Ping(ctx); err != nil {
		return fmt.Errorf("the listening connection was silent for %s and did not answer a ping within %s: %w",
			listenProbeEvery, listenProbeTimeout, err)
	}
	return nil
}
