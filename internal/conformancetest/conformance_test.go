package conformancetest

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"

	"usersd/internal/proctest"
)

// serverSwitch makes the test binary the server under test instead of running its tests: the
// runner starts it once per server configuration.
const serverSwitch = "USERS_CONFORMANCE_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(serverSwitch) == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
		defer stop()
		if err := Serve(ctx, os.Stdin, os.Stdout, os.Stderr); err != nil {
			os.Stderr.WriteString("conformance server: " + err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestConnectConformance runs the Connect conformance suite (connectrpc.com/conformance, pinned in
// tools/go.mod) in server mode against usersd's handler with the suite's service mounted: every
// case of config.yaml's features must pass, except those listed in known-failing.txt, which must
// fail (each is a deliberate difference, see docs/API.md#connect-conformance).
func TestConnectConformance(t *testing.T) {
	runner := buildRunner(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), runner, "--mode", "server", "--conf", "config.yaml",
		"--known-failing", "@known-failing.txt", "--", self)
	cmd.Env = append(os.Environ(), serverSwitch+"=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("the conformance suite failed (%v):\n%s", err, out.String())
	}
	t.Logf("%s", lastLines(out.Bytes(), 5))
}

// buildRunner builds the suite's runner at the version tools/go.mod pins, or skips (fails under
// USERS_REQUIRE_CONFORMANCE=1, as in CI) when it cannot be built, as on a machine without the
// module proxy or a module cache that holds it.
func buildRunner(t *testing.T) string {
	t.Helper()
	runner := filepath.Join(t.TempDir(), "connectconformance")
	build := exec.CommandContext(t.Context(), "go", "build", "-modfile=tools/go.mod", "-o", runner,
		"connectrpc.com/conformance/cmd/connectconformance")
	build.Dir = filepath.Join("..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		proctest.MissingTool(t, "USERS_REQUIRE_CONFORMANCE", "the conformance runner cannot be built ("+err.Error()+"):\n"+string(out))
	}
	return runner
}

func lastLines(b []byte, n int) []byte {
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return bytes.Join(lines, []byte("\n"))
}
