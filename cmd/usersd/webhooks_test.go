package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	usersv1 "usersd/gen/users/v1"
	"usersd/internal/apitest"
	"usersd/internal/proctest"
)

// TestWebhooksAreManagedOnEveryRPCProtocolAndDelivered: the Webhooks service of the real binary,
// on each RPC protocol, needs webhooks.manage (a key that holds only the users' scopes is refused,
// no key is unauthenticated), refuses a receiver the server's policy does not allow, and each
// subscription made is sent the next create, with the key that made it as its actor.
func TestWebhooksAreManagedOnEveryRPCProtocolAndDelivered(t *testing.T) {
	t.Parallel()
	keysFile := filepath.Join(t.TempDir(), "keys.txt")
	keys := apitest.Key + " name=admin\nwriter-key-0123456789 name=writer scopes=users.read,users.write\n"
	if err := os.WriteFile(keysFile, []byte(keys), 0o600); err != nil {
		t.Fatal(err)
	}
	p := proctest.Start(t, []string{"USERS_API_KEYS="}, filepath.Join(t.TempDir(), "users.db"),
		"-api-keys-file", keysFile, "-webhooks-allow-http", "-webhooks-allow-private")

	var mu sync.Mutex
	received := map[string][]map[string]any{} // by the receiver path each subscription names
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var event map[string]any
		if err := json.Unmarshal(body, &event); err != nil {
			t.Errorf("a delivery is not JSON: %s", body)
		}
		mu.Lock()
		received[r.URL.Path] = append(received[r.URL.Path], event)
		mu.Unlock()
	}))
	t.Cleanup(receiver.Close)

	ctx := context.Background()
	for _, protocol := range apitest.RPCProtocols {
		admin := apitest.WebhooksClient(p.BaseURL, protocol, apitest.Key)
		created, err := admin.CreateWebhook(ctx, &usersv1.CreateWebhookRequest{Webhook: &usersv1.Webhook{Url: receiver.URL + "/" + protocol.Name}})
		if err != nil {
			t.Fatalf("%s: create: %v", protocol.Name, err)
		}
		if created.GetWebhook().GetSecret() == "" || !created.GetWebhook().GetEnabled() {
			t.Fatalf("%s: created %v, want it enabled with its secret", protocol.Name, created)
		}
		got, err := admin.GetWebhook(ctx, &usersv1.GetWebhookRequest{Id: created.GetWebhook().GetId()})
		if err != nil || got.GetWebhook().GetUrl() != receiver.URL+"/"+protocol.Name || got.GetWebhook().GetSecret() != "" {
			t.Fatalf("%s: get: %v, %v; want it without its secret", protocol.Name, got, err)
		}
		_, err = admin.CreateWebhook(ctx, &usersv1.CreateWebhookRequest{Webhook: &usersv1.Webhook{Url: "ftp://example.com/hooks"}})
		apitest.RPCWantCode(t, err, connect.CodeInvalidArgument)
		_, err = apitest.WebhooksClient(p.BaseURL, protocol, "writer-key-0123456789").ListWebhooks(ctx, &usersv1.ListWebhooksRequest{})
		apitest.RPCWantCode(t, err, connect.CodePermissionDenied)
		_, err = apitest.WebhooksClient(p.BaseURL, protocol, "").ListWebhooks(ctx, &usersv1.ListWebhooksRequest{})
		apitest.RPCWantCode(t, err, connect.CodeUnauthenticated)
	}
	list, err := apitest.WebhooksClient(p.BaseURL, apitest.RPCProtocols[0], apitest.Key).ListWebhooks(ctx, &usersv1.ListWebhooksRequest{})
	if err != nil || len(list.GetWebhooks()) != len(apitest.RPCProtocols) {
		t.Fatalf("list: %v, %v; want one subscription a protocol, and none of the refused ones", list, err)
	}

	user := apitest.CreateUser(t, p.BaseURL, "Hooked", "editor")
	deadline := time.Now().Add(20 * time.Second)
	for _, protocol := range apitest.RPCProtocols {
		for {
			mu.Lock()
			events := received["/"+protocol.Name]
			mu.Unlock()
			if len(events) > 0 {
				data, _ := events[0]["data"].(map[string]any)
				if events[0]["type"] != "dev.usersd.user.created" || data["id"] != user["id"] || events[0]["actor"] != "admin" {
					t.Fatalf("%s's receiver got %v; want the create of user %v by admin", protocol.Name, events[0], user["id"])
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s's receiver got nothing within 20 s", protocol.Name)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}
