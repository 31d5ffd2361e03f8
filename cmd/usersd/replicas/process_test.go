package replicas_test

import (
	"flag"
	"os"
	"os/exec"
	"testing"

	"usersd/internal/apitest"
	"usersd/internal/proctest"
)

// testServer is a usersd process the test started, and how to talk to it.
type testServer struct {
	apitest.Server
	dbPath string // the -db it was started with
}

// startProcess starts the real binary as one replica on the database db, with any extra flags, and
// waits until it listens (see proctest.Start).
//
// The tests here spend most of their time waiting for a timeout to pass or a fault to be noticed,
// or check what was kept or delivered, not how fast. Each has processes, a schema or a cluster of
// its own: most run beside each other (t.Parallel), two at a time on two cores, the waiting of
// some filling with the work of others. Their checks read what happened from the servers and their
// logs, or allow a hang detector's time, so another's load does not fail them. The tests that read
// a standby's freshness by the clock stay serial.
func startProcess(t *testing.T, db string, flags ...string) (*exec.Cmd, *testServer, <-chan []map[string]any) {
	t.Helper()
	p := proctest.Start(t, nil, db, flags...)
	return p.Cmd, &testServer{Server: p.Server, dbPath: db}, p.Lines
}

// The requests and answers of every test here, as apitest sends and reads them.
type (
	request  = apitest.Request
	response = apitest.Response
)

// TestMain starts the one build of usersd at once when the whole package runs (see
// proctest.Main), then checks the contract report of every answer the tests read.
func TestMain(m *testing.M) {
	flag.Parse()
	code := proctest.Main(m, flag.Lookup("test.run").Value.String(), flag.Lookup("test.list").Value.String())
	if !apitest.Report(os.Stdout, testing.Verbose()) && code == 0 {
		code = 1
	}
	os.Exit(code)
}
