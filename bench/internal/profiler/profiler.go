// Package profiler serves Go's profiler for the baselines, on a loopback address of its own, so
// that bench/run --profile measures where their CPU goes as it does usersd's (-admin-addr).
package profiler

import (
	"log"
	"net/http"
	_ "net/http/pprof" // registers /debug/pprof/ on http.DefaultServeMux
)

// Serve serves the profiler on addr in the background; an empty addr serves nothing.
func Serve(addr string) {
	if addr == "" {
		return
	}
	go func() { log.Fatal(http.ListenAndServe(addr, http.DefaultServeMux)) }()
}
