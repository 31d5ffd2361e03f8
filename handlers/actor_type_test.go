package handlers

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"usersd/auth/oidctest"
	usersv1 "usersd/gen/users/v1"
	"usersd/internal/apitest"
)

// TestAKeyAndATokenOfOneNameAreTwoActors: the API key named importer and a bearer token whose
// subject is importer make one change each; on every way to watch, both changes carry actor
// "importer", told apart by actor_type, and a watcher without a credential sees neither.
func TestAKeyAndATokenOfOneNameAreTwoActors(t *testing.T) {
	iss := oidctest.Start(t)
	s := startBearerService(t, iss, time.Hour)
	waitForKeys(t, s, iss)
	token := iss.Sign(t, "rs256", iss.Claims(bearerAudience, "importer", "users.write"))
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
			byKey := s.Do(t, apitest.HTTP1Client, apitest.Request{Method: "POST", Path: "/users", Body: `{"name":"By the key"}`,
				Header: map[string]string{"Content-Type": "application/json", APIKeyHeader: scopesWriterKey}})
			if byKey.Status != http.StatusCreated {
				t.Fatalf("create with the key: %d %s", byKey.Status, byKey.Body)
			}
			if byToken := createWithToken(t, s, token, "By the token"); byToken.Status != http.StatusCreated {
				t.Fatalf("create with the token: %d %s", byToken.Status, byToken.Body)
			}
			for _, want := range []struct {
				name      string
				actorType usersv1.UserEvent_ActorType
			}{
				{"By the key", usersv1.UserEvent_ACTOR_TYPE_API_KEY},
				{"By the token", usersv1.UserEvent_ACTOR_TYPE_TOKEN},
			} {
				e := keyed.Next(t, 10*time.Second)
				if e.GetUser().GetName() != want.name || e.GetActor() != "importer" || e.GetActorType() != want.actorType {
					t.Errorf("the keyed watcher's change: %v; want %q by importer, %v", e.UserEvent, want.name, want.actorType)
				}
				if p.SSE != nil && !containsAll(e.Data, `"actor":"importer"`, `"actorType":"`+want.actorType.String()+`"`) {
					t.Errorf("the event's data %s, want actor and actorType in JSON", e.Data)
				}
				if e := anonymous.Next(t, 10*time.Second); e.GetActor() != "" || e.GetActorType() != usersv1.UserEvent_ACTOR_TYPE_UNSPECIFIED {
					t.Errorf("the anonymous watcher's change: %v, want no actor and no actor type", e.UserEvent)
				}
			}
		})
	}
}

func containsAll(s string, parts ...string) bool {
	for _, part := range parts {
		if !strings.Contains(s, part) {
			return false
		}
	}
	return true
}
