// Package proctest runs the real usersd binary for the tests of the packages that need a process
// of it (cmd/usersd, cmd/usersd/replicas): one build per test binary, started on a loopback port,
// its JSON log lines read back; and what the machine may lack, and the faults on the way to
// PostgreSQL, that those tests share.
package proctest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"usersd/internal/apitest"
)

// Version is the version stamped on the one usersd binary that the tests build: what its
// `usersd version` must print.
const Version = "v0.0.0-image"

var (
	buildOnce   sync.Once
	builtBinary string
	buildErr    error
)

// Binary builds the real usersd once per test binary, the way the Dockerfile builds the image's
// (static: CGO_ENABLED=0, -trimpath, stripped, stamped with Version), and returns its path. Every
// test that runs the binary runs this one build: TestTheContainerImageRecipe checks it is the
// static binary the image needs, TestVersion its stamp, and the rest need nothing that cgo would
// give (SQLite is modernc.org/sqlite, compiled from Go). A build of its own for each would cost the
// most where it hurts: -trimpath and CGO_ENABLED=0 share no compiled package with go test's own
// build, so on a cold build cache the image's build compiles every dependency again, and a machine
// compiling something else at the same time once took 9 minutes over it.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(build)
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBinary
}

// Main runs a test binary's tests (m.Run), and returns its exit code. When the whole package runs
// (no -run, no -list), it starts the one build at once, so that on a cold build cache its compile
// goes on beside the tests that need no binary instead of before the first that needs one; and it
// removes the binary afterwards. flag.Parse must have run.
func Main(m *testing.M, runFlag, listFlag string) int {
	if runFlag == "" && listFlag == "" {
		go buildOnce.Do(build)
	}
	code := m.Run()
	buildOnce.Do(func() {}) // waits for a build that no test waited for
	if builtBinary != "" {
		os.RemoveAll(filepath.Dir(builtBinary))
	}
	return code
}

// build makes the one build (see Binary), and logs how long it took.
func build() {
	started := time.Now()
	dir, err := os.MkdirTemp("", "usersd-bin-")
	if err != nil {
		buildErr = err
		return
	}
	builtBinary = filepath.Join(dir, "usersd")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w -X main.version="+Version, "-o", builtBinary, "usersd/cmd/usersd")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		buildErr = fmt.Errorf("the image's build (CGO_ENABLED=0 go build -trimpath): %v\n%s", err, out)
	}
	fmt.Fprintf(os.Stderr, "the one build of usersd for the tests took %v\n", time.Since(started).Round(time.Millisecond))
}

// Process is a usersd binary started by Start.
type Process struct {
	Cmd            *exec.Cmd
	apitest.Server // where it listens
	// Lines delivers every JSON line the process wrote on stdout, once, when it has exited.
	Lines <-chan []map[string]any
}

// Start starts the real binary on a loopback port, on the database dbPath, with flags and with
// env (NAME=value) added to the test's environment, and waits until it listens. USERS_API_KEYS is
// apitest.Key unless env sets it; NAME= (nothing after the sign) leaves NAME out of the process's
// environment, since usersd tells a variable set to nothing from one not set. The process is killed
// when the test ends.
func Start(t testing.TB, env []string, dbPath string, flags ...string) *Process {
	t.Helper()
	cmd := exec.Command(Binary(t), append([]string{"-addr", "127.0.0.1:0", "-db", dbPath}, flags...)...)
	cmd.Env = withEnv(append(os.Environ(), "USERS_API_KEYS="+apitest.Key), env)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })

	listening := make(chan string, 1)
	allLines := make(chan []map[string]any, 1)
	go func() {
		var lines []map[string]any
		scanner := bufio.NewScanner(stdout)
		for scanner.Scan() {
			var entry map[string]any
			if json.Unmarshal(scanner.Bytes(), &entry) == nil {
				lines = append(lines, entry)
				if entry["msg"] == "listening" {
					listening <- fmt.Sprint(entry["addr"])
				}
			}
		}
		allLines <- lines
	}()
	select {
	case addr := <-listening:
		return &Process{Cmd: cmd, Server: apitest.Server{BaseURL: "http://" + addr}, Lines: allLines}
	case <-time.After(20 * time.Second):
		t.Fatal("the binary did not listen within 20s")
		return nil
	}
}

// FreeLoopbackAddr returns a loopback address whose port was free a moment ago: for a listener of
// the binary's that it does not report, such as -admin-addr.
func FreeLoopbackAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// withEnv returns base with each NAME=value of env in place of base's NAME, and without NAME where
// env has NAME= with nothing after the sign.
func withEnv(base, env []string) []string {
	out := slices.Clone(base)
	for _, kv := range env {
		name, value, _ := strings.Cut(kv, "=")
		out = slices.DeleteFunc(out, func(e string) bool { return strings.HasPrefix(e, name+"=") })
		if value != "" {
			out = append(out, kv)
		}
	}
	return out
}
