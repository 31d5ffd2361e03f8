package handlers

import (
	"net/http"
	"testing"
	"time"

	"usersd/internal/apitest"
)

// TestAWatchSeesWhoMadeEachChangeOnlyWithACredential: on every way to watch, a change made with the
// key named importer carries actor "importer" to a watcher that sent a key, and no actor to one
// that sent none (public reads do not tell anyone who changed what).
func TestAWatchSeesWhoMadeEachChangeOnlyWithACredential(t *testing.T) {
	s := startServerWith(t, Config{Keys: scopesTestKeySet(t)})
	for _, p := range apitest.WatchProtocols() {
		t.Run(p.Name, func(t *testing.T) {
			keyed, err := apitest.OpenWatchWithKey(t, s.Server, p, scopesReaderKey, -1, "")
			if err != nil {
				t.Fatal(err)
			}
			anonymous, err := apitest.OpenWatch(t, s.Server, p, -1, "")
			if err != nil {
				t.Fatal(err)
			}
			res := s.Do(t, apitest.HTTP1Client, apitest.Request{Method: "POST", Path: "/users", Body: `{"name":"Watched"}`,
				Header: map[string]string{"Content-Type": "application/json", APIKeyHeader: scopesWriterKey}})
			if res.Status != http.StatusCreated {
				t.Fatalf("create: %d %s", res.Status, res.Body)
			}
			if e := keyed.Next(t, 10*time.Second); e.GetActor() != "importer" {
				t.Errorf("the keyed watcher's change: actor %q (%v), want importer", e.GetActor(), e.UserEvent)
			}
			if e := anonymous.Next(t, 10*time.Second); e.GetActor() != "" || e.GetUser().GetName() != "Watched" {
				t.Errorf("the anonymous watcher's change: %v, want the user without an actor", e.UserEvent)
			}
		})
	}
}
