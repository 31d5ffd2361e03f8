package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"usersd/internal/apitest"
)

// TestTheBrowserPageWorksWithAReadOnlyKeyAndSaysWhy serves with reads private and a rate limit, and
// drives the page with a read-only key: the page asks for the key before it can list, lists with
// it, says in words that the key may not make changes (403), and says so again when the key has
// spent its rate (429).
func TestTheBrowserPageWorksWithAReadOnlyKeyAndSaysWhy(t *testing.T) {
	ctx := newBrowser(t)
	dashboard, dashboardLine := newKeyLine(t, "-name", "dashboard", "-scopes", "users.read")
	keysFile := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(keysFile, []byte(dashboardLine+"\n"+apitest.Key+" name=tests\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, s, _ := startProcessWithEnv(t, []string{"USERS_API_KEYS="}, filepath.Join(t.TempDir(), "users.db"),
		"-api-keys-file", keysFile, "-public-reads=false", "-rate-limit", "0.2", "-rate-burst", "8")
	p := browserPage{t: t, ctx: ctx}

	p.do("open the page", chromedp.Navigate(s.BaseURL+"/"))
	p.waitFor("the key dialog: reads need a key here", `document.getElementById("key-dialog").open`)
	p.fill("#key-input", dashboard)
	p.do("use the read-only key", chromedp.Click(chromedp.CSS(`#key-dialog button[value=save]`)))
	p.waitFor("the list, read with the key", `document.getElementById("page-info").textContent.includes("0 users")`)

	p.fill(`#create-form input[name=name]`, "Refused")
	p.do("create with the read-only key", chromedp.Click(chromedp.CSS(`#create-form button[type=submit]`)))
	p.waitFor("the refusal", `!document.getElementById("error").hidden`)
	if msg := p.text("error"); !strings.Contains(msg, "may not do that") || !strings.Contains(msg, "users.write") {
		t.Fatalf("error shown for a 403: %q", msg)
	}

	// The key's bucket holds 8 and fills at one every 5 s: a few more tries spend it.
	for try := 0; !strings.Contains(p.text("error"), "Too many requests"); try++ {
		if try == 10 {
			t.Fatalf("10 more creates and no rate refusal; error shown: %q", p.text("error"))
		}
		p.do("clear the error", chromedp.Evaluate[chromedp.Void](`document.getElementById("error").textContent = ""`))
		p.do("create again", chromedp.Click(chromedp.CSS(`#create-form button[type=submit]`)))
		p.waitFor("the answer", `document.getElementById("error").textContent !== ""`)
	}
}
