// The debug listener: Go's profiler (net/http/pprof) on an address of its own, off by default.
package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// defaultDebugHeaderTimeout bounds how long a debug client may take to send its headers.
const defaultDebugHeaderTimeout = 5 * time.Second

// serveDebug serves the profiler on addr until ctx ends. It is a separate listener so that it is
// never reachable through the service's port (which load balancers expose), and it is meant for
// loopback or a private network only: profiles reveal the program's internals.
func serveDebug(ctx context.Context, addr string, logger *slog.Logger) error {
	listener, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: defaultDebugHeaderTimeout}
	logger.Info("debug listening", "addr", listener.Addr().String())
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	go func() {
		if err := srv.Serve(listener); !errors.Is(err, http.ErrServerClosed) {
			logger.Error("debug listener stopped", "error", err)
		}
	}()
	return nil
}
