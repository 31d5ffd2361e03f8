// What every connection to PostgreSQL is set to, so that a replica that stops answering (a
// partition, a lost host, a frozen process) cannot hold what the other replicas need: a
// transaction of its that the server still holds open keeps the locks it took, and every other
// replica's writes that need them wait.
package sqlstore

import (
	"net"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

const (
	// idleInTransactionTimeout ends, on the server, a session that sits inside a transaction
	// without sending anything for this long, releasing its locks. usersd's transactions never
	// wait on anything between their statements, so only a client that is gone or frozen gets
	// there; the other replicas' writes wait at most this long for it.
	idleInTransactionTimeout = 5 * time.Second
	// keepAliveIdle, keepAliveInterval and keepAliveCount are the TCP keepalives on both ends of a
	// connection: a peer that stops answering is found out in about 5 + 2 x 3 seconds, where the
	// kernel's defaults take more than two hours.
	keepAliveIdle     = 5 * time.Second
	keepAliveInterval = 2 * time.Second
	keepAliveCount    = 3
	// userTimeout is how long the server's sends may go unacknowledged before it drops the
	// connection: keepalives only probe an idle connection, and a backend blocked sending to a
	// peer that vanished would otherwise wait for the kernel's retransmissions (about 15 minutes).
	userTimeout = keepAliveIdle + keepAliveCount*keepAliveInterval
	// statementTimeout ends a statement that runs this long: a backstop above the request deadline
	// (10 s by default), for a statement whose client's cancel never reached the server. The
	// migrations, which may run longer on a large table, lift it for their own transactions.
	statementTimeout = 30 * time.Second
	// lockTimeout ends a statement that waits this long for a lock: every lock usersd takes is held
	// for the length of a commit, so a longer wait means that something holds it that should not,
	// and the write is refused (unavailable, to be retried) instead of waiting for its deadline.
	lockTimeout = 5 * time.Second
)

// setSessionLimits sets config's connections to end a session idle in a transaction, a statement
// that runs or waits for a lock too long, and to find a silent peer in seconds, on the server (session parameters sent at connection, unless the URL
// sets them itself) and in this process (the dialer's keepalives). pooled says that the
// connection goes through a pooler, which refuses session parameters it does not know: the pooler
// then needs the same limits in its own settings (docs/POSTGRESQL.md#through-a-pooler).
func setSessionLimits(config *pgx.ConnConfig, pooled bool) {
	dialer := &net.Dialer{
		Timeout: config.ConnectTimeout,
		KeepAliveConfig: net.KeepAliveConfig{
			Enable: true, Idle: keepAliveIdle, Interval: keepAliveInterval, Count: keepAliveCount,
		},
	}
	config.DialFunc = dialer.DialContext
	if pooled {
		return
	}
	for name, value := range map[string]string{
		"idle_in_transaction_session_timeout": strconv.FormatInt(idleInTransactionTimeout.Milliseconds(), 10),
		"statement_timeout":                   strconv.FormatInt(statementTimeout.Milliseconds(), 10),
		"lock_timeout":                        strconv.FormatInt(lockTimeout.Milliseconds(), 10),
		"tcp_user_timeout":                    strconv.FormatInt(userTimeout.Milliseconds(), 10),
		"tcp_keepalives_idle":                 strconv.Itoa(int(keepAliveIdle.Seconds())),
		"tcp_keepalives_interval":             strconv.Itoa(int(keepAliveInterval.Seconds())),
		"tcp_keepalives_count":                strconv.Itoa(keepAliveCount),
	} {
		if _, set := config.RuntimeParams[name]; !set {
			config.RuntimeParams[name] = value
		}
	}
}
