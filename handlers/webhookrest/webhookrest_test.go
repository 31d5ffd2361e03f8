package webhookrest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"usersd/auth"
	"usersd/handlers"
	"usersd/internal/apitest"
	"usersd/store/sqlstore"
	"usersd/webhooks"
)

const (
	webhooksAdminKey = apitest.Key                          // every scope
	webhooksUsersKey = "webhooks-rest-users-key-0123456789" // users.read and users.write alone
)

// TestMain fails the run when an answer did not match openapi.json: the tests' HTTP client checks
// each one against the document.
func TestMain(m *testing.M) {
	code := m.Run()
	if !apitest.Report(os.Stdout, testing.Verbose()) && code == 0 {
		code = 1
	}
	os.Exit(code)
}

// startWebhooksREST serves New with the Webhooks service over a real SQLite file, its policy
// allowing loopback http receivers, as -webhooks-allow-http and -webhooks-allow-private do.
func startWebhooksREST(t *testing.T) string {
	t.Helper()
	st, err := sqlstore.Open(context.Background(), filepath.Join(t.TempDir(), "users.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	keys := &auth.APIKeys{}
	if err := keys.Add(auth.NewAPIKey(webhooksAdminKey)); err != nil {
		t.Fatal(err)
	}
	usersOnly, err := auth.ParseAPIKey(webhooksUsersKey + " name=users-only scopes=users.read,users.write")
	if err != nil {
		t.Fatal(err)
	}
	if err := keys.Add(usersOnly); err != nil {
		t.Fatal(err)
	}
	svc, err := handlers.New(handlers.Config{Store: st, Keys: keys, Logger: slog.New(slog.DiscardHandler),
		Webhooks: webhooks.NewService(st, webhooks.Policy{AllowHTTP: true, AllowPrivate: true})})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(svc)
	t.Cleanup(srv.Close)
	return srv.URL
}

type webhookAnswer struct {
	status int
	header http.Header
	body   []byte
}

// webhookJSON is a Webhook as REST answers it.
type webhookJSON struct {
	ID                int32    `json:"id"`
	URL               string   `json:"url"`
	Types             []string `json:"types"`
	Role              string   `json:"role"`
	Enabled           bool     `json:"enabled"`
	DeliveredSequence string   `json:"deliveredSequence"`
	LatestSequence    string   `json:"latestSequence"`
	Secret            string   `json:"secret"`
	CreateTime        string   `json:"createTime"`
}

func webhookREST(t *testing.T, base, key, method, path, contentType, body string) webhookAnswer {
	t.Helper()
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if key != "" {
		req.Header.Set(handlers.APIKeyHeader, key)
	}
	res, err := apitest.HTTP1Client.Do(req) // each answer is checked against openapi.json
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return webhookAnswer{status: res.StatusCode, header: res.Header, body: b}
}

func (a webhookAnswer) webhook(t *testing.T) webhookJSON {
	t.Helper()
	var w webhookJSON
	if err := json.Unmarshal(a.body, &w); err != nil {
		t.Fatalf("not a webhook: %s (%v)", a.body, err)
	}
	return w
}

// wantError checks an error answer: its status, the error body, and its reason when given.
func (a webhookAnswer) wantError(t *testing.T, what string, status int, reason string) {
	t.Helper()
	if a.status != status {
		t.Errorf("%s: %d %s, want %d", what, a.status, a.body, status)
		return
	}
	_, got, err := apitest.CheckErrorBody(a.body)
	if err != nil || (reason != "" && got != reason) {
		t.Errorf("%s: body %s (%v), want the error body of reason %s", what, a.body, err, reason)
	}
}

// TestWebhooksAreAResourceOnREST drives every REST route of subscriptions over a real listener:
// the answers are the protojson form of the Webhooks service's messages, the secret is shown by
// the create and the rotation alone, a merge patch sets the members it names, and the custom
// methods take POST alone.
func TestWebhooksAreAResourceOnREST(t *testing.T) {
	base := startWebhooksREST(t)
	do := func(method, path, contentType, body string) webhookAnswer {
		return webhookREST(t, base, webhooksAdminKey, method, path, contentType, body)
	}

	created := do("POST", "/webhooks", "application/json",
		`{"url":"http://127.0.0.1:9/hooks","types":["dev.usersd.user.updated","dev.usersd.user.created"],"role":"editor","secret":"ignored","id":77}`)
	if created.status != http.StatusCreated {
		t.Fatalf("create: %d %s", created.status, created.body)
	}
	hook := created.webhook(t)
	path := fmt.Sprintf("/webhooks/%d", hook.ID)
	if created.header.Get("Location") != path || hook.ID == 77 || !strings.HasPrefix(hook.Secret, "whsec_") || hook.Secret == "whsec_ignored" ||
		!hook.Enabled || hook.Role != "editor" || !slices.Equal(hook.Types, []string{"dev.usersd.user.created", "dev.usersd.user.updated"}) || hook.CreateTime == "" {
		t.Fatalf("created %s (Location %q); want it enabled at its own id, with its secret, types and role", created.body, created.header.Get("Location"))
	}

	got := do("GET", path, "", "")
	if got.status != http.StatusOK || got.webhook(t).URL != "http://127.0.0.1:9/hooks" || strings.Contains(string(got.body), "whsec_") {
		t.Fatalf("get: %d %s; want the subscription without its secret", got.status, got.body)
	}
	list := do("GET", "/webhooks", "", "")
	var listed []webhookJSON
	if err := json.Unmarshal(list.body, &listed); list.status != http.StatusOK || err != nil || len(listed) != 1 || listed[0].ID != hook.ID || listed[0].Secret != "" {
		t.Fatalf("list: %d %s (%v); want a JSON array of the one subscription, without its secret", list.status, list.body, err)
	}

	// A merge patch sets what it names: null role sends every role's changes; the rest stays.
	patched := do("PATCH", path, "application/merge-patch+json", `{"role":null,"enabled":false,"deliveredSequence":"99"}`)
	if p := patched.webhook(t); patched.status != http.StatusOK || p.Role != "" || p.Enabled || p.URL != hook.URL || len(p.Types) != 2 || p.DeliveredSequence == "99" {
		t.Fatalf("patch: %d %s; want role cleared, disabled, the rest unchanged and the output-only member ignored", patched.status, patched.body)
	}
	if p := do("PATCH", path, "application/json", `{"types":null,"enabled":true}`); p.status != http.StatusOK || len(p.webhook(t).Types) != 0 || !p.webhook(t).Enabled {
		t.Fatalf("patch of types to null: %d %s; want every type, enabled", p.status, p.body)
	}
	do("PATCH", path, "application/json", `{"url":null}`).wantError(t, "patch url to null", http.StatusBadRequest, "INVALID_FIELD")
	do("PATCH", path, "application/json", `{"enabled":null}`).wantError(t, "patch enabled to null", http.StatusBadRequest, "INVALID_FIELD")
	do("PATCH", path, "application/json", `{"id":12345,"role":"admin"}`).wantError(t, "patch with another id", http.StatusBadRequest, "INVALID_FIELD")
	do("PATCH", path, "application/json", `{"url":"ftp://example.com/"}`).wantError(t, "patch to an ftp URL", http.StatusBadRequest, "INVALID_FIELD")
	do("PATCH", path, "text/plain", `{"role":"admin"}`).wantError(t, "patch as text/plain", http.StatusUnsupportedMediaType, "")
	if after := do("GET", path, "", "").webhook(t); after.URL != hook.URL || after.Role != "" || !after.Enabled {
		t.Errorf("refused patches changed the subscription: %+v", after)
	}

	// The rotation answers a new secret, with no body or an empty object; another id is refused.
	rotated := do("POST", path+":rotateSecret", "", "")
	if rotated.status != http.StatusOK || !strings.HasPrefix(rotated.webhook(t).Secret, "whsec_") || rotated.webhook(t).Secret == hook.Secret {
		t.Fatalf("rotate: %d %s; want a new secret", rotated.status, rotated.body)
	}
	if again := do("POST", path+":rotateSecret", "application/json", `{}`); again.status != http.StatusOK || again.webhook(t).Secret == rotated.webhook(t).Secret {
		t.Fatalf("rotate with {}: %d %s; want another new secret", again.status, again.body)
	}
	do("POST", path+":rotateSecret", "application/json", `{"id":12345}`).wantError(t, "rotate with another id", http.StatusBadRequest, "INVALID_FIELD")
	do("POST", path+":rotateSecret", "text/plain", `x`).wantError(t, "rotate with a text body", http.StatusUnsupportedMediaType, "")

	// A replay moves the position back to a sequence the log has; none past its newest.
	apitest.CreateUser(t, base, "Changed", "editor")
	latest := do("GET", path, "", "").webhook(t).LatestSequence
	if replayed := do("POST", path+":replay", "application/json", `{"afterSequence":"0"}`); replayed.status != http.StatusOK ||
		replayed.webhook(t).DeliveredSequence != "" || replayed.webhook(t).LatestSequence != latest {
		t.Fatalf("replay from 0: %d %s; want the position at 0 (left out) and the latest sequence %s", replayed.status, replayed.body, latest)
	}
	do("POST", path+":replay", "application/json", `{"afterSequence":"99999"}`).wantError(t, "replay past the newest change", http.StatusBadRequest, "INVALID_FIELD")
	do("POST", path+":replay", "application/json", `{"afterSequence":-1}`).wantError(t, "replay from -1", http.StatusBadRequest, "INVALID_FIELD")
	do("POST", path+":replay", "application/json", `{"after":1}`).wantError(t, "replay with an unknown member", http.StatusBadRequest, "INVALID_FIELD")
	do("POST", path+":replay", "application/json", `{}`).wantError(t, "replay without afterSequence", http.StatusBadRequest, "INVALID_FIELD")

	if deliveries := do("GET", path+"/deliveries", "", ""); deliveries.status != http.StatusOK || string(deliveries.body) != "[]" {
		t.Errorf("deliveries with no engine running: %d %s; want an empty array", deliveries.status, deliveries.body)
	}

	// Custom methods take POST alone, whether or not another route at the path takes the method;
	// a verb that is not one is a miss.
	for _, method := range []string{"GET", "PATCH", "DELETE", "PUT", "OPTIONS"} {
		res := do(method, path+":replay", "", "")
		if res.status != http.StatusMethodNotAllowed || res.header.Get("Allow") != "POST" {
			t.Errorf("%s %s:replay: %d (Allow %q); want 405, Allow: POST", method, path, res.status, res.header.Get("Allow"))
		}
	}
	do("POST", path+":explode", "application/json", `{}`).wantError(t, "an unknown verb", http.StatusMethodNotAllowed, "")
	do("POST", path, "application/json", `{}`).wantError(t, "POST without a verb", http.StatusMethodNotAllowed, "")

	if res := do("DELETE", path, "", ""); res.status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", res.status, res.body)
	}
	for _, method := range []string{"GET", "DELETE"} {
		do(method, path, "", "").wantError(t, method+" after the delete", http.StatusNotFound, "WEBHOOK_NOT_FOUND")
	}
	do("GET", path+"/deliveries", "", "").wantError(t, "deliveries after the delete", http.StatusNotFound, "WEBHOOK_NOT_FOUND")
	do("POST", path+":replay", "application/json", `{"afterSequence":"0"}`).wantError(t, "replay after the delete", http.StatusNotFound, "WEBHOOK_NOT_FOUND")
	do("GET", "/webhooks/0", "", "").wantError(t, "a malformed id", http.StatusBadRequest, "INVALID_FIELD")
}

// TestEveryBadSubscriptionIsRefusedAndCreatesNothing: each bad input to POST /webhooks is a 400
// (INVALID_FIELD) that says what is wrong, and the list stays empty.
func TestEveryBadSubscriptionIsRefusedAndCreatesNothing(t *testing.T) {
	base := startWebhooksREST(t)
	for _, c := range []struct{ name, body, says string }{
		{"no url", `{}`, "url is required"},
		{"an ftp url", `{"url":"ftp://127.0.0.1/hooks"}`, "https"},
		{"http on a host that is not loopback", `{"url":"http://example.com/hooks"}`, "loopback"},
		{"a user in the url", `{"url":"https://me:pw@127.0.0.1/hooks"}`, "user"},
		{"a fragment", `{"url":"https://127.0.0.1/hooks#x"}`, "fragment"},
		{"a host that does not resolve", `{"url":"https://no-such-host.invalid/hooks"}`, "resolve"},
		{"an unknown type", `{"url":"http://127.0.0.1:9/","types":["dev.usersd.user.exploded"]}`, "dev.usersd.user.exploded"},
		{"a role of two lines", `{"url":"http://127.0.0.1:9/","role":"editor\nadmin"}`, "webhook.role"},
		{"an unknown member", `{"url":"http://127.0.0.1:9/","colour":"red"}`, "colour"},
		{"types not a list", `{"url":"http://127.0.0.1:9/","types":"dev.usersd.user.created"}`, "unexpected token"},
		{"not JSON", `{"url":`, "JSON"},
	} {
		res := webhookREST(t, base, webhooksAdminKey, "POST", "/webhooks", "application/json", c.body)
		res.wantError(t, c.name, http.StatusBadRequest, "INVALID_FIELD")
		if !strings.Contains(string(res.body), c.says) {
			t.Errorf("%s: %s; want it to say %q", c.name, res.body, c.says)
		}
	}
	if list := webhookREST(t, base, webhooksAdminKey, "GET", "/webhooks", "", ""); list.status != http.StatusOK || string(list.body) != "[]" {
		t.Fatalf("after refused creates: %d %s; want no subscription", list.status, list.body)
	}
}

// TestWebhookRoutesNeedTheirScope: reads of subscriptions included, every route needs
// webhooks.manage, with reads of users public: no key is 401, a key with the users' scopes 403.
func TestWebhookRoutesNeedTheirScope(t *testing.T) {
	base := startWebhooksREST(t)
	if res := webhookREST(t, base, "", "GET", "/users", "", ""); res.status != http.StatusOK {
		t.Fatalf("GET /users without a key: %d; the test wants reads of users public", res.status)
	}
	for _, route := range []struct{ method, path, body string }{
		{"GET", "/webhooks", ""}, {"POST", "/webhooks", `{"url":"http://127.0.0.1:9/"}`}, {"GET", "/webhooks/1", ""},
		{"PATCH", "/webhooks/1", `{"role":"admin"}`}, {"DELETE", "/webhooks/1", ""}, {"POST", "/webhooks/1:rotateSecret", ""},
		{"POST", "/webhooks/1:replay", `{"afterSequence":"0"}`}, {"GET", "/webhooks/1/deliveries", ""},
	} {
		contentType := ""
		if route.body != "" {
			contentType = "application/json"
		}
		webhookREST(t, base, "", route.method, route.path, contentType, route.body).
			wantError(t, route.method+" "+route.path+" without a key", http.StatusUnauthorized, "UNAUTHENTICATED")
		webhookREST(t, base, webhooksUsersKey, route.method, route.path, contentType, route.body).
			wantError(t, route.method+" "+route.path+" with the users' scopes", http.StatusForbidden, "")
	}
	if list := webhookREST(t, base, webhooksAdminKey, "GET", "/webhooks", "", ""); string(list.body) != "[]" {
		t.Fatalf("refused requests made a subscription: %s", list.body)
	}
}
