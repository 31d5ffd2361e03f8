// The admin listener: Prometheus metrics (/metrics) and Go's profiler (net/http/pprof), on an
// address of its own, off by default.
package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// adminHeaderTimeout bounds how long an admin client may take to send its headers.
const adminHeaderTimeout = 5 * time.Second

// newMetrics returns the registry that /metrics serves: the Go runtime's and the process's
// collectors, to which the service adds its own.
func newMetrics() *prometheus.Registry {
	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return registry
}

// serveAdmin serves the metrics of registry and the profiler on addr until ctx ends. It is a
// separate listener so that it is never reachable through the service's port (which load balancers
// expose); it is meant for loopback or a private network only, since profiles reveal the program's
// internals.
func serveAdmin(ctx context.Context, addr string, registry *prometheus.Registry, logger *slog.Logger) error {
	listener, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelError)}))
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: adminHeaderTimeout}
	logger.Info("admin listening", "addr", listener.Addr().String())
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	go func() {
		if err := srv.Serve(listener); !errors.Is(err, http.ErrServerClosed) {
			logger.Error("admin listener stopped", "error", err)
		}
	}()
	return nil
}
