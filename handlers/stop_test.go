package handlers

import (
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"usersd/internal/apitest"
)

// TestStoppingEndsWatchesInItsOwnWords: a clean stop ends every open watch with unavailable and
// says the server is stopping, on every protocol, and logs no warning: it once logged "store
// unavailable" for each watch, which read as a database failure.
func TestStoppingEndsWatchesInItsOwnWords(t *testing.T) {
	s := startServer(t)
	var watches []*apitest.WatchStream
	for _, p := range apitest.WatchProtocols() {
		watches = append(watches, apitest.StartWatch(t, s.Server, p, -1, ""))
	}
	s.service.EndWatches()
	for i, p := range apitest.WatchProtocols() {
		err := watches[i].Ended(t, 5*time.Second)
		apitest.WantWatchCode(t, p, err, connect.CodeUnavailable, 0)
		if !strings.Contains(err.Error(), "the server is stopping") {
			t.Errorf("%s: the watch ended with %q; want it to say the server is stopping", p.Name, err)
		}
	}
	time.Sleep(100 * time.Millisecond) // the last handlers' lines
	if warnings := s.logs.Entries(map[string]any{"level": "WARN"}); len(warnings) > 0 {
		t.Fatalf("a clean stop logged %d warnings, the first: %v", len(warnings), warnings[0])
	}
}
