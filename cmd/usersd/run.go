// run: the whole program, callable from tests with its own arguments, environment and output.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus/collectors"

	"usersd/auth"
	"usersd/certfile"
	"usersd/coalesce"
	"usersd/handlers"
	"usersd/store"
	"usersd/store/observed"
	"usersd/store/sqlstore"
	"usersd/warmstack"
	"usersd/webhooks"
)

// http2Workers bounds the goroutines that serve HTTP/2 requests on grown stacks (package
// warmstack): as many as the streams of a few busy connections; past them a request is served on
// its stream's own goroutine.
const http2Workers = 256

// userCacheSize bounds the users kept in memory on SQLite: about 300 bytes each.
const userCacheSize = 10_000

// run serves until ctx is cancelled, then drains requests under way and closes the store last. A
// value on again (main sends a second SIGINT or SIGTERM there) ends the drain at once: run closes
// the store, and returns an error if that leaves requests unanswered. A nil again never ends it.
// Logs go to stdout as JSON lines; the first line about the listener says which address it took.
func run(ctx context.Context, again <-chan os.Signal, args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer) (err error) {
	getenv := func(name string) string { v, _ := lookupEnv(name); return v }
	if len(args) > 0 && args[0] == "backup" {
		return runBackup(ctx, args[1:], getenv, stdout)
	}
	if len(args) > 0 && args[0] == "help" {
		args = []string{"-h"} // the word people try first, as with go help
	}
	if len(args) > 0 && args[0] == "healthcheck" {
		return runHealthcheck(ctx, args[1:], getenv, stdout)
	}
	if len(args) > 0 && args[0] == "key" {
		return runKey(args[1:], stdout)
	}
	if len(args) > 0 && args[0] == "version" {
		if len(args) > 1 {
			return fmt.Errorf("usersd version takes no arguments, got %q", args[1:])
		}
		fmt.Fprintln(stdout, readBuildInfo())
		return nil
	}
	cfg, err := parseConfig(args, getenv, stdout)
	if errors.Is(err, errHelpShown) {
		return nil
	}
	if err != nil {
		return err
	}
	if cfg.showVersion {
		fmt.Fprintln(stdout, readBuildInfo())
		return nil
	}
	keys, err := loadAPIKeys(cfg, lookupEnv)
	if err != nil {
		return err
	}
	logs := newLogOutput(stdout)
	defer logs.Flush() // the access log's last batch, once everything else is done
	logger := slog.New(slog.NewJSONHandler(logs.Now(), &slog.HandlerOptions{Level: cfg.logLevel}))
	// The certificate is read before anything listens, and a start without it is a mistake of
	// the settings: one line, as the others before the log starts.
	var certs *certfile.Reloader
	if cfg.tlsCert != "" {
		if certs, err = certfile.New(cfg.tlsCert, cfg.tlsKey, logger); err != nil {
			return err
		}
	}
	// What ends the process is its last log line too, as JSON like the rest, for whatever collects
	// the log; main also prints it on stderr, for whoever started the process.
	defer func() {
		if err != nil {
			logger.Error("exiting on an error", "error", err.Error())
		}
	}()

	storeOptions := []sqlstore.Option{sqlstore.WithLogger(logger), sqlstore.WithWriteBatch(int(cfg.writeBatch))}
	if cfg.dbDirect != "" {
		storeOptions = append(storeOptions, sqlstore.WithDirect(cfg.dbDirect))
	}
	if len(cfg.dbRead) > 0 {
		storeOptions = append(storeOptions, sqlstore.WithReadStandbys(cfg.dbRead, cfg.dbReadMaxLag))
	}
	// A database that does not answer yet is waited for, with the server already answering its
	// probes (starting.go); otherwise the server listens once the service is ready.
	var early *startedEarly
	st, err := openWhenReady(ctx, cfg.db, storeOptions, cfg.dbWait, logger, func() (err error) {
		early, err = startEarly(cfg, certs, keys.Len(), logger)
		return err
	})
	if err != nil && early != nil {
		early.stop(logger)
		if ctx.Err() != nil {
			logger.Info("stopped", "before", "the database answered")
			return nil
		}
	}
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	defer st.Close() // after the server has drained: requests under way still need it
	// A key is made only for a start that gets this far: one that fails never shows a key that
	// nothing accepts.
	if generated := ensureAKey(keys); generated != "" {
		logger.Warn("no API keys configured (USERS_API_KEYS or -api-keys-file): generated one for this run; writes need it in the x-api-key header",
			"api_key", generated)
	}

	tracing, stopTracing, err := newTracing(ctx, logger)
	if err != nil {
		return fmt.Errorf("tracing: %w", err)
	}
	defer func() {
		if err := stopTracing(); err != nil {
			logger.Warn("tracing stopped with spans unsent", "error", err)
		}
	}()
	if tracing != nil {
		logger.Info("tracing on")
	}
	registry := newMetrics()
	for name, pool := range st.Pools() {
		registry.MustRegister(collectors.NewDBStatsCollector(pool, name))
	}
	registry.MustRegister(writeBatchCollectors(st)...)
	if len(cfg.dbRead) > 0 {
		registry.MustRegister(readRoutingCollector{st})
	}

	// The cache is above the observed store, so that a store call is a call to the database. On
	// SQLite this process is the only writer, so hot users can be served from memory; on a
	// PostgreSQL that replicas share, another process's write could not invalidate them.
	observedStore, err := observed.New(st, observed.Options{Metrics: registry, Tracing: tracing, System: st.System()})
	if err != nil {
		return fmt.Errorf("store metrics: %w", err)
	}
	var data store.Store = observedStore
	if !st.Shared() {
		cache := store.WithUserCache(data, userCacheSize)
		registry.MustRegister(cacheCollectors(cache)...)
		data = cache
	}
	// What runs beside the server stops when run returns, however it returns.
	background, stopBackground := context.WithCancel(ctx)
	defer stopBackground()
	var bearer *auth.BearerConfig
	if cfg.jwtIssuer != "" {
		bearer = &auth.BearerConfig{Issuer: cfg.jwtIssuer, Audience: cfg.jwtAudience}
	}
	// Webhook subscriptions and their delivery read and write the store itself, not the observed or
	// cached one: their calls are few, and the engine has metrics of its own.
	policy := webhooks.Policy{AllowHTTP: cfg.webhooksAllowHTTP, AllowPrivate: cfg.webhooksAllowPrivate}
	webhookMetrics, err := webhooks.NewMetrics(registry)
	if err != nil {
		return fmt.Errorf("webhook metrics: %w", err)
	}
	engine := webhooks.NewEngine(st, policy, cfg.webhooksSource, logger, webhookMetrics)
	subscriptions := webhooks.NewService(st, policy)
	subscriptions.OnChange(engine.Poke)
	service, err := handlers.New(handlers.Config{
		Webhooks: subscriptions,
		Bearer:   bearer, Background: background,
		Store: data, Keys: keys, PrivateReads: !cfg.publicReads,
		RateLimit: cfg.rateLimit, RateBurst: int(cfg.rateBurst), Logger: logger, AccessLog: accessLog(logs, cfg.logLevel), LogProbes: cfg.logLevel <= slog.LevelDebug,
		MaxBodyBytes:   cfg.maxBodyBytes,
		RequestTimeout: cfg.limits.requestTimeout, CORSOrigins: cfg.corsOrigins, TrustRequestID: cfg.trustRequestID,
		Metrics: registry, Tracing: tracing, MaxWatchers: int(cfg.maxWatchers), WatchHeartbeat: cfg.watchHeartbeat,
		DeletedRetention:   cfg.deletedRetention,
		WatchersPerAddress: int(cfg.watchersPerAddress), WatchersPerConnection: int(cfg.watchersPerConnection),
		AnswerMemory: cfg.answerMemory,
	})
	if err != nil {
		return err
	}
	// An HTTP/2 request other than a watch runs on a worker whose stack has already grown.
	serving := warmstack.Handler(service, http2Workers, service.Lasting)
	var srv *http.Server
	var served chan error
	if early != nil {
		srv, served = early.srv, early.served
	} else {
		srv = newServer(serving, cfg.limits, certs, logger)
	}
	// Watches never end by themselves: Shutdown would wait for them until the grace ran out.
	srv.RegisterOnShutdown(service.EndWatches)

	if cfg.adminAddr != "" {
		if err := serveAdmin(background, cfg.adminAddr, registry, logger); err != nil {
			return fmt.Errorf("admin listener: %w", err)
		}
	}

	if early != nil {
		early.handler.use(serving)
		logger.Info("serving")
	} else {
		listener, err := net.Listen("tcp", cfg.addr)
		if err != nil {
			return err
		}
		logger.Info("listening", listeningAttrs(cfg, listener.Addr(), st.System(), keys.Len())...)
		served = make(chan error, 1)
		go func() { served <- serve(srv, listener) }()
	}

	go sweepExpired(background, observedStore, sweepInterval, logger) // observed: its calls are timed too
	go purgeDeleted(background, observedStore, purgeInterval(cfg.deletedRetention), logger)
	delivering := make(chan struct{})
	go func() {
		defer close(delivering)
		engine.Run(background)
	}()
	// Deliveries stop last, once no request is under way, and give their subscriptions up so that
	// another replica takes them over at once.
	defer func() {
		stopBackground()
		<-delivering
	}()

	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}

	// An operator who signals again will not wait for the drain: hurried ends both of its waits.
	hurried, hurry := context.WithCancelCause(context.Background())
	defer hurry(nil)
	go func() {
		select {
		case sig := <-again:
			logger.Warn("stopping at once: a second signal came during the drain", "signal", sig.String())
			hurry(fmt.Errorf("a second signal (%s) during the drain", sig))
		case <-hurried.Done():
		}
	}()

	// Health says NOT_SERVING first, while every route still works, so that load balancers move new
	// requests elsewhere; then the server stops accepting and lets requests under way finish.
	service.Drain()
	logger.Info("draining", "delay", cfg.drainDelay.String())
	select {
	case <-time.After(cfg.drainDelay):
	case <-hurried.Done():
	}
	logger.Info("shutting down", "grace", cfg.shutdownGrace.String())
	drainCtx, cancel := context.WithTimeout(hurried, cfg.shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(drainCtx); err != nil {
		if cause := context.Cause(hurried); cause != nil {
			return fmt.Errorf("shutdown: %w: stopped with requests still under way", cause)
		}
		return fmt.Errorf("shutdown: requests still under way after %s: %w", cfg.shutdownGrace, err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	logger.Info("stopped")
	return nil
}

// accessLog is where the access lines go: nowhere when the log level leaves out INFO lines.
func accessLog(logs *logOutput, level slog.Level) io.Writer {
	if level > slog.LevelInfo {
		return nil
	}
	return logs.Later()
}

// listeningAttrs are the attributes of the "listening" line: where, and on which database.
func listeningAttrs(cfg config, addr net.Addr, backend string, keys int) []any {
	attrs := []any{"addr", addr.String(), "tls", cfg.tlsCert != "", "backend", backend, "db", redactDSN(cfg.db), "api_keys", keys}
	if cfg.dbDirect != "" {
		attrs = append(attrs, "db_direct", redactDSN(cfg.dbDirect))
	}
	if len(cfg.dbRead) > 0 {
		redacted := make([]string, len(cfg.dbRead))
		for i, url := range cfg.dbRead {
			redacted[i] = redactDSN(url)
		}
		attrs = append(attrs, "db_read", redacted, "db_read_max_lag", cfg.dbReadMaxLag.String())
	}
	return attrs
}

// serve serves srv on listener until it stops: over TLS when srv has a TLS configuration (ServeTLS
// adds the ALPN names of HTTP/2 and HTTP/1.1), else HTTP/1.1 and h2c. Under TLS the write batcher
// sees encrypted records, in which no HTTP/2 preface shows, and passes writes straight through.
func serve(srv *http.Server, listener net.Listener) error {
	if srv.TLSConfig != nil {
		return srv.ServeTLS(coalesce.Listener(listener), "", "")
	}
	return srv.Serve(coalesce.Listener(listener))
}

// startedEarly is the server of a process that listens before its database answers: it serves
// handlers.Starting until the service is ready.
type startedEarly struct {
	srv     *http.Server
	handler *handlerSwitch
	served  chan error
}

// startEarly listens and serves handlers.Starting, and logs "listening" with ready false.
func startEarly(cfg config, certs *certfile.Reloader, keys int, logger *slog.Logger) (*startedEarly, error) {
	listener, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return nil, err
	}
	e := &startedEarly{handler: newHandlerSwitch(handlers.Starting()), served: make(chan error, 1)}
	e.srv = newServer(e.handler, cfg.limits, certs, logger)
	go func() { e.served <- serve(e.srv, listener) }()
	logger.Info("listening", append(listeningAttrs(cfg, listener.Addr(), "postgresql", keys), "ready", false)...)
	return e, nil
}

// stop closes the early server of a process that will not serve after all.
func (e *startedEarly) stop(logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := e.srv.Shutdown(ctx); err != nil {
		logger.Warn("the starting server did not stop cleanly", "error", err)
	}
}

// redactDSN hides the password of a database URL, given in its user part or as a parameter, so
// that it never reaches a log.
func redactDSN(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.Scheme == "" {
		return dsn // a file path
	}
	if q := u.Query(); q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

// newServer returns the one server: HTTP/1.1 and unencrypted HTTP/2 (h2c with prior knowledge) on the
// same port, so gRPC needs no TLS and no second listener.
func newServer(handler http.Handler, limits serverLimits, certs *certfile.Reloader, logger *slog.Logger) *http.Server {
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	var tlsConfig *tls.Config
	if certs != nil {
		protocols.SetHTTP2(true)
		// TLS 1.2 at least; Go's defaults choose the suites and curves.
		tlsConfig = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: certs.GetCertificate}
	}
	return &http.Server{
		TLSConfig:         tlsConfig,
		Handler:           handler,
		ConnContext:       handlers.ConnContext,
		Protocols:         &protocols,
		ReadHeaderTimeout: limits.readHeaderTimeout,
		ReadTimeout:       limits.readTimeout,
		WriteTimeout:      limits.writeTimeout,
		IdleTimeout:       limits.idleTimeout,
		MaxHeaderBytes:    int(limits.maxHeaderBytes),
		HTTP2: &http.HTTP2Config{
			MaxConcurrentStreams: int(limits.http2MaxStreams),
			MaxReadFrameSize:     int(limits.http2MaxFrameSize),
			WriteByteTimeout:     limits.http2WriteByteTimeout,
			SendPingTimeout:      limits.http2PingTimeout,
			PingTimeout:          limits.http2PingTimeout,
		},
		ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
}
