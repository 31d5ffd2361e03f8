package main

import (
	"slices"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"usersd/internal/apitest"
	"usersd/store/storetest"
)

// TestThePageReadsItsOwnWritesFromStandbys serves the page from a binary whose reads go to read
// standbys that replay nothing (both paused) yet are within a generous lag limit: an untokened read
// would show the list as it was before the pause. The page sends back the token of its last write,
// so the user it creates and the name it saves show at once.
func TestThePageReadsItsOwnWritesFromStandbys(t *testing.T) {
	ctx := newBrowser(t)
	c := storetest.StartCluster(t)
	_, s, _ := startProcess(t, c.Primary.URL(), "-db-read", c.Sync.URL()+" "+c.Async.URL(), "-db-read-max-lag", "30s")
	s.CreateUser(t, "Ada", "")
	time.Sleep(500 * time.Millisecond) // both standbys replay Ada
	p := browserPage{t: t, ctx: ctx}
	p.do("open the page", chromedp.Navigate(s.BaseURL+"/"))
	p.waitFor("the list", `document.querySelectorAll("#user-rows tr[data-user-id]").length === 1`)
	p.do("give the key", chromedp.Evaluate[chromedp.Void](`sessionStorage.setItem("usersd.apiKey", "`+apitest.Key+`")`))
	c.Sync.PauseReplay(t)
	c.Async.PauseReplay(t)

	p.fill(`#create-form input[name=name]`, "Readback")
	names := p.listAfter("create", chromedp.Click(chromedp.CSS(`#create-form button[type=submit]`)))
	if !slices.Contains(names, "Readback") {
		t.Fatalf("the list drawn after the create shows %v, without the user it created", names)
	}
	p.waitFor("the created user's panel", `document.getElementById("detail-title").textContent === "Readback"`)

	p.fill(`#edit-form input[name=name]`, "Readback renamed")
	p.do("save", chromedp.Click(chromedp.CSS(`#edit-form button[type=submit]`)))
	p.waitFor("the saved name in the list", `[...document.querySelectorAll("#user-rows button.link")].some(b => b.textContent === "Readback renamed")`)
	if msg := p.text("error"); msg != "" && !eval[bool](p, `document.getElementById("error").hidden`) {
		t.Fatalf("the page shows an error: %q", msg)
	}
	// The standbys still hold neither write: what the page showed came from the primary.
	if got := p.names(); slices.Contains(got, "Readback") {
		t.Fatalf("the list went back to the old name: %v", got)
	}
}
