// CPU profiles of each scenario's server under its load: with -profile DIR every run of this
// checkout's usersd, and of the baselines, serves Go's profiler on a loopback port of its own, and
// the measurement's CPU profile is written to DIR; layers.go turns them into the report's table of
// CPU per request by layer. The profiler costs a little CPU, so the figures of a profiled run are
// not the ones to quote.
package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// adminAddr returns a loopback address for usersd's admin listener (the profiler) whose port was free a moment ago.
func adminAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// profileCPU asks the profiler at addr for a CPU profile of d and writes it to path. It returns
// at once; the result arrives on the channel when the profile is written.
func profileCPU(addr string, d time.Duration, path string) <-chan error {
	done := make(chan error, 1)
	go func() {
		seconds := max(int(d.Seconds()), 1)
		client := &http.Client{Timeout: d + 30*time.Second}
		res, err := client.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, seconds))
		if err != nil {
			done <- fmt.Errorf("cpu profile: %w", err)
			return
		}
		defer res.Body.Close()
		if res.StatusCode != http.StatusOK {
			done <- fmt.Errorf("cpu profile: %s", res.Status)
			return
		}
		f, err := os.Create(path)
		if err != nil {
			done <- err
			return
		}
		_, err = io.Copy(f, res.Body)
		done <- errors.Join(err, f.Close())
	}()
	return done
}

// profilePath is where the profile of one run goes.
func (r *runner) profilePath(round int, sc scenario) string {
	return filepath.Join(r.profileDir, fmt.Sprintf("%d-%s.pprof", round, sc.id))
}
