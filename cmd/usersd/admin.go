// The admin listener: Prometheus metrics (/metrics) and Go's profiler (net/http/pprof), on an
// address of its own, off by default; and the collectors that cmd/usersd adds to the registry itself.
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

	"usersd/store"
	"usersd/store/sqlstore"
)

// adminHeaderTimeout bounds how long an admin client may take to send its headers.
const adminHeaderTimeout = 5 * time.Second

// newMetrics returns the registry that /metrics serves: the Go runtime's and the process's
// collectors, to which the service adds its own.
func newMetrics() *prometheus.Registry {
	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		readBuildInfo().collector())
	return registry
}

// cacheCollectors report what the user cache does: its reads by result, and its size.
func cacheCollectors(cache *store.UserCache) []prometheus.Collector {
	const lookupsHelp = "Reads of a user by id that the in-process user cache (SQLite only) answered (result hit) or passed to the database (miss)."
	lookups := func(result string, pick func(hits, misses uint64) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "usersd_user_cache_lookups_total", Help: lookupsHelp, ConstLabels: prometheus.Labels{"result": result},
		}, func() float64 { return float64(pick(cache.Lookups())) })
	}
	return []prometheus.Collector{
		lookups("hit", func(hits, _ uint64) uint64 { return hits }),
		lookups("miss", func(_, misses uint64) uint64 { return misses }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "usersd_user_cache_users", Help: "Users held by the in-process user cache.",
		}, func() float64 { return float64(cache.Len()) }),
	}
}

// writeBatchCollectors report the group commit of writes: commits and the writes they carried (their
// ratio is the mean batch), and the writes waiting for the next commit.
func writeBatchCollectors(st *sqlstore.Store) []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "usersd_write_commits_total", Help: "Commits of batched writes (-write-batch above 1).",
		}, func() float64 { return float64(st.WriteBatches().Commits) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "usersd_write_batched_total", Help: "Writes that batched commits carried, those that failed alone included.",
		}, func() float64 { return float64(st.WriteBatches().Writes) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "usersd_write_waiting", Help: "Writes waiting for the next commit.",
		}, func() float64 { return float64(st.WriteBatches().Waiting) }),
	}
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
