// The version of the binary: what `usersd version` and -version print, and usersd_build_info says.
package main

import (
	"fmt"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// version is the release the binary was built as, stamped by a release build:
//
//	go build -trimpath -ldflags "-X main.version=v1.2.0" ./cmd/usersd
//
// Without it, the module's version from the build info is used ("(devel)" for a build from a
// checkout), so `go install usersd/cmd/usersd@v1.2.0` needs no stamp.
var version string

// buildInfo is what the binary knows of its own build.
type buildInfo struct {
	version   string
	commit    string // the VCS revision, "unknown" when built without one
	modified  bool   // built from a checkout with changes not committed
	goVersion string
}

func readBuildInfo() buildInfo {
	b := buildInfo{version: version, commit: "unknown", goVersion: "unknown"}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		if b.version == "" {
			b.version = "unknown"
		}
		return b
	}
	b.goVersion = info.GoVersion
	if b.version == "" {
		b.version = info.Main.Version
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			b.commit = s.Value
		case "vcs.modified":
			b.modified = s.Value == "true"
		}
	}
	return b
}

// String is the line that `usersd version` prints.
func (b buildInfo) String() string {
	commit := b.commit
	if b.modified {
		commit += " (modified)"
	}
	return fmt.Sprintf("usersd %s, commit %s, %s", b.version, commit, b.goVersion)
}

// collector is usersd_build_info: always 1, with the build as its labels, so that a dashboard can
// show which build each replica runs.
func (b buildInfo) collector() prometheus.Collector {
	commit := b.commit
	if b.modified {
		commit += "-modified"
	}
	gauge := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "usersd_build_info",
		Help:        "Always 1; the labels say which build runs: its version, VCS commit and Go version.",
		ConstLabels: prometheus.Labels{"version": b.version, "commit": commit, "go_version": b.goVersion},
	})
	gauge.Set(1)
	return gauge
}
