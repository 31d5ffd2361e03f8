package main

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"usersd/internal/apitest"
)

// TestTheBrowserPageShowsChangesLive opens the page in headless Chromium, then changes users over
// REST as another client would, and checks that the page shows each change without a reload.
func TestTheBrowserPageShowsChangesLive(t *testing.T) {
	ctx := newBrowser(t)
	s := startServer(t)
	s.CreateUser(t, "Ada", "engineer")
	p := browserPage{t: t, ctx: ctx}

	p.do("open the page", chromedp.Navigate(s.BaseURL+"/"))
	p.waitFor("the list", `document.querySelectorAll("#user-rows tr[data-user-id]").length === 1`)
	// Only a stream that has started receives what follows; before it, a reload would show it.
	p.waitFor("the watch to start", `document.getElementById("live").dataset.state === "live"`)
	// A reload or a navigation would lose this: the changes must come to the same document.
	p.do("mark the document", chromedp.Evaluate[chromedp.Void](`window.sameDocument = true`))

	// Each step works on what the one before left: stop at the first that fails.
	step := func(name string, f func(t *testing.T)) {
		if !t.Run(name, f) {
			t.FailNow()
		}
	}
	row := func(id int) string {
		return fmt.Sprintf(`document.querySelector('#user-rows tr[data-user-id="%d"]')`, id)
	}
	var id int
	step("a user created elsewhere appears", func(t *testing.T) {
		p := browserPage{t: t, ctx: ctx}
		start := time.Now()
		id = int(s.CreateUser(t, "Grace", "admiral")["id"].(float64))
		p.waitFor("the new user in the list", row(id)+`?.querySelector("button.link")?.textContent === "Grace"`)
		t.Logf("shown %v after the create", time.Since(start).Round(time.Millisecond))
		if info := p.text("page-info"); info != "Page 1 of 1 (2 users)" {
			t.Fatalf("page info %q", info)
		}
	})

	step("a user updated elsewhere changes", func(t *testing.T) {
		p := browserPage{t: t, ctx: ctx}
		res := s.Do(t, apitest.HTTP1Client, request{Method: "PATCH", Path: fmt.Sprintf("/users/%d", id), Key: true,
			Header: map[string]string{"Content-Type": "application/merge-patch+json"},
			Body:   `{"name": "Grace Hopper", "role": "rear admiral"}`})
		if res.Status != http.StatusOK {
			t.Fatalf("PATCH: %d %s", res.Status, res.Body)
		}
		p.waitFor("the new name and role", row(id)+`?.querySelector("button.link")?.textContent === "Grace Hopper" && `+
			row(id)+`.textContent.includes("rear admiral")`)
	})

	step("a user deleted elsewhere disappears", func(t *testing.T) {
		p := browserPage{t: t, ctx: ctx}
		if res := s.Do(t, apitest.HTTP1Client, request{Method: "DELETE", Path: fmt.Sprintf("/users/%d", id), Key: true}); res.Status != http.StatusNoContent {
			t.Fatalf("DELETE: %d %s", res.Status, res.Body)
		}
		p.waitFor("the user to leave the list", row(id)+` === null`)
		if info := p.text("page-info"); info != "Page 1 of 1 (1 user)" {
			t.Fatalf("page info %q", info)
		}
		if !eval[bool](p, `window.sameDocument === true`) {
			t.Fatal("the page was reloaded to show the changes")
		}
	})

	step("the page says so when the server stops", func(t *testing.T) {
		p := browserPage{t: t, ctx: ctx}
		s.stop() // ends the watch with unavailable; the page keeps trying to resume
		p.waitFor("the live indicator to go", `document.getElementById("live").dataset.state === "retrying"`)
	})
}
