// run: the whole program, callable from tests with its own arguments, environment and output.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"usersd/handlers"
	"usersd/store/sqlstore"
)

// run serves until ctx is cancelled, then drains requests under way and closes the store last.
// Logs go to stdout as JSON lines; the first line about the listener says which address it took.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, err := parseConfig(args, getenv, stderr)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewJSONHandler(stdout, nil))
	keys, err := loadAPIKeys(cfg, getenv, logger)
	if err != nil {
		return err
	}

	st, err := sqlstore.Open(ctx, cfg.db)
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	defer st.Close() // after the server has drained: requests under way still need it

	handler, err := handlers.New(handlers.Config{Store: st, Keys: keys, Logger: logger, MaxBodyBytes: cfg.maxBodyBytes})
	if err != nil {
		return err
	}
	srv := newServer(handler, logger)

	listener, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return err
	}
	logger.Info("listening", "addr", listener.Addr().String(), "db", cfg.db, "api_keys", keys.Len())

	served := make(chan error, 1)
	go func() { served <- srv.Serve(listener) }()
	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}

	logger.Info("shutting down", "grace", cfg.shutdownGrace.String())
	drainCtx, cancel := context.WithTimeout(context.Background(), cfg.shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(drainCtx); err != nil {
		return fmt.Errorf("shutdown: requests still under way after %s: %w", cfg.shutdownGrace, err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	logger.Info("stopped")
	return nil
}

// newServer returns the one server: HTTP/1.1 and unencrypted HTTP/2 (h2c with prior knowledge) on the
// same port, so gRPC needs no TLS and no second listener.
func newServer(handler http.Handler, logger *slog.Logger) *http.Server {
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	return &http.Server{
		Handler:           handler,
		Protocols:         &protocols,
		ReadHeaderTimeout: 5 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
}
