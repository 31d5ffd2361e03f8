package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"usersd/internal/apitest"
)

// TestTheBrowserPageManagesWebhooks drives the page's webhooks view in headless Chromium against
// the binary and a receiver on loopback: a key without webhooks.manage is refused in words, a
// receiver the policy refuses makes nothing, a subscription made on the page shows its secret once,
// is sent the next change, and shows how far behind it is and its deliveries; a pause holds the
// changes back until the resume, and the delete ends it.
func TestTheBrowserPageManagesWebhooks(t *testing.T) {
	ctx := newBrowser(t)
	usersOnly, usersOnlyLine := newKeyLine(t, "-name", "dashboard", "-scopes", "users.read,users.write")
	keysFile := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(keysFile, []byte(usersOnlyLine+"\n"+apitest.Key+" name=admin\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, s, _ := startProcessWithEnv(t, []string{"USERS_API_KEYS="}, filepath.Join(t.TempDir(), "users.db"),
		"-api-keys-file", keysFile, "-webhooks-allow-http", "-webhooks-allow-private")

	var mu sync.Mutex
	var received []string // the subject of each delivery, in order
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var event struct{ Subject string }
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &event); err != nil {
			t.Errorf("a delivery is not JSON: %s", body)
		}
		mu.Lock()
		received = append(received, event.Subject)
		mu.Unlock()
	}))
	t.Cleanup(receiver.Close)
	deliveries := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), received...)
	}
	// waitForDeliveries waits for the receiver to have n deliveries: a new or resumed subscription
	// is taken up at the engine's next lease round, a few seconds away.
	waitForDeliveries := func(t *testing.T, n int) []string {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for len(deliveries()) < n {
			if time.Now().After(deadline) {
				t.Fatalf("waited 20s for %d deliveries; the receiver has %v", n, deliveries())
			}
			time.Sleep(50 * time.Millisecond)
		}
		return deliveries()
	}

	p := browserPage{t: t, ctx: ctx}
	step := func(name string, f func(t *testing.T)) {
		if !t.Run(name, f) {
			t.FailNow()
		}
	}
	p.do("open the page", chromedp.Navigate(s.BaseURL+"/"))
	p.waitFor("the list", `document.getElementById("page-info").textContent.includes("0 users")`)

	step("a key without webhooks.manage is refused in words", func(t *testing.T) {
		p := browserPage{t: t, ctx: ctx}
		p.do("open the webhooks view", chromedp.Click(chromedp.CSS(`#webhooks summary`)))
		p.waitFor("the key dialog", `document.getElementById("key-dialog").open`)
		p.fill("#key-input", usersOnly)
		p.do("use the users' key", chromedp.Click(chromedp.CSS(`#key-dialog button[value=save]`)))
		p.waitFor("the refusal", `!document.getElementById("error").hidden`)
		if msg := p.text("error"); !strings.Contains(msg, "may not manage webhooks") || !strings.Contains(msg, "webhooks.manage") {
			t.Fatalf("error shown for a 403: %q", msg)
		}
		p.do("forget the key", chromedp.Click(chromedp.CSS(`#forget-key`)), chromedp.Click(chromedp.CSS(`#webhooks summary`)))
		p.waitFor("the view to close", `!document.getElementById("webhooks").open`)
		p.do("open it again", chromedp.Click(chromedp.CSS(`#webhooks summary`)))
		p.waitFor("the key dialog", `document.getElementById("key-dialog").open`)
		p.fill("#key-input", apitest.Key)
		p.do("use the admin key", chromedp.Click(chromedp.CSS(`#key-dialog button[value=save]`)))
		p.waitFor("the empty list of subscriptions", `document.getElementById("webhook-rows").textContent.includes("No subscriptions yet")`)
	})

	step("a receiver the policy refuses makes nothing and says why", func(t *testing.T) {
		p := browserPage{t: t, ctx: ctx}
		p.fill(`#webhook-form input[name=url]`, "ftp://127.0.0.1/hooks")
		p.do("subscribe", chromedp.Click(chromedp.CSS(`#webhook-form button[type=submit]`)))
		p.waitFor("the refusal", `!document.getElementById("error").hidden && document.getElementById("error").textContent.includes("https")`)
		if n := eval[int](p, `document.querySelectorAll("#webhook-rows tr[data-id]").length`); n != 0 {
			t.Fatalf("%d subscriptions shown after a refused one", n)
		}
	})

	var id string
	step("a subscription shows its secret once and is sent the next change", func(t *testing.T) {
		p := browserPage{t: t, ctx: ctx}
		p.fill(`#webhook-form input[name=url]`, receiver.URL+"/hooks")
		p.do("tick created", chromedp.Click(chromedp.CSS(`#webhook-form input[value="dev.usersd.user.created"]`)))
		p.do("subscribe", chromedp.Click(chromedp.CSS(`#webhook-form button[type=submit]`)))
		p.waitFor("the new row", `document.querySelectorAll("#webhook-rows tr[data-id]").length === 1`)
		if secret := p.text("webhook-secret"); !strings.Contains(secret, "whsec_") || !strings.Contains(secret, "shown this once") {
			t.Fatalf("secret shown: %q", secret)
		}
		id = eval[string](p, `document.querySelector("#webhook-rows tr[data-id]").dataset.id`)
		if row := eval[string](p, `document.querySelector("#webhook-rows tr[data-id]").textContent`); !strings.Contains(row, receiver.URL) ||
			!strings.Contains(row, "created") || strings.Contains(row, "updated") || !strings.Contains(row, "Sending") {
			t.Fatalf("row shown: %q", row)
		}
		user := strconv.Itoa(apitest.IDOf(t, s.CreateUser(t, "Hooked", "")))
		if got := waitForDeliveries(t, 1); got[0] != "users/"+user {
			t.Fatalf("the receiver got %v, want the create of user %s", got, user)
		}
		p.waitFor("the delivery, and nothing behind", `document.querySelector("#webhook-rows td.behind").textContent === "0 changes" && `+
			`document.querySelector("#webhook-rows td.behind").title.startsWith("Delivered up to change 1;") && `+
			`document.querySelector("#webhook-rows td.state").textContent === "Sending"`)
		if got := deliveries(); len(got) != 1 {
			t.Fatalf("the receiver got %v, want the one create of user %s", got, user)
		}
		p.click("show the deliveries", `#webhook-rows button[data-action=deliveries]`)
		p.waitFor("the delivery attempt", `!document.getElementById("deliveries").hidden && document.querySelector("#delivery-rows td.answer")?.textContent === "200"`)
	})

	step("a pause holds changes back until the resume", func(t *testing.T) {
		p := browserPage{t: t, ctx: ctx}
		p.click("pause", `#webhook-rows button[data-action=pause]`)
		p.waitFor("the paused state", `document.querySelector("#webhook-rows td.state").textContent === "Paused"`)
		user := strconv.Itoa(apitest.IDOf(t, s.CreateUser(t, "Held back", "")))
		p.waitFor("one change behind", `document.querySelector("#webhook-rows td.behind").textContent === "1 change"`)
		if got := deliveries(); len(got) != 1 {
			t.Fatalf("a paused subscription was sent %v", got)
		}
		p.click("resume", `#webhook-rows button[data-action=resume]`)
		if got := waitForDeliveries(t, 2); got[1] != "users/"+user {
			t.Fatalf("after the resume the receiver has %v, want the held-back create of user %s", got, user)
		}
		p.waitFor("nothing behind again", `document.querySelector("#webhook-rows td.behind").textContent === "0 changes" && `+
			`document.querySelector("#webhook-rows td.behind").title.startsWith("Delivered up to change 2;")`)
		if got := deliveries(); len(got) != 2 {
			t.Fatalf("after the resume the receiver has %v, want two deliveries", got)
		}
	})

	step("a new secret is shown once, and the delete ends the subscription", func(t *testing.T) {
		p := browserPage{t: t, ctx: ctx}
		before := p.text("webhook-secret")
		p.click("rotate", `#webhook-rows button[data-action=rotate]`)
		p.waitFor("the new secret", `document.getElementById("webhook-secret").textContent.includes("new secret")`)
		if after := p.text("webhook-secret"); after == before || !strings.Contains(after, "whsec_") {
			t.Fatalf("secret shown after the rotation: %q (before: %q)", after, before)
		}
		p.click("delete", `#webhook-rows button[data-action=delete]`)
		p.waitFor("the empty list", `document.getElementById("webhook-rows").textContent.includes("No subscriptions yet") && document.getElementById("deliveries").hidden`)
		res := apitest.Do(t, apitest.HTTP1Client, s.BaseURL, apitest.Request{Method: "GET", Path: "/webhooks/" + id, Key: true})
		if res.Status != http.StatusNotFound {
			t.Fatalf("GET /webhooks/%s after the delete: %d %s", id, res.Status, res.Body)
		}
	})
}
