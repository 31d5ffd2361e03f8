package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	usersv1 "usersd/gen/users/v1"
	"usersd/internal/apitest"
	"usersd/internal/proctest"
)

// chromePath finds the browser for the end-to-end test: USERS_TEST_CHROME, else Debian's chromium.
// Without one the test is skipped, saying how to run it, unless USERS_REQUIRE_BROWSER=1 (CI).
func chromePath(t *testing.T) string {
	t.Helper()
	path := os.Getenv("USERS_TEST_CHROME")
	if path == "" {
		path = "/usr/bin/chromium"
	}
	if _, err := os.Stat(path); err != nil {
		proctest.MissingTool(t, "USERS_REQUIRE_BROWSER", fmt.Sprintf("no browser at %s (%v): install Chromium (apt-get install chromium) "+
			"or set USERS_TEST_CHROME to a Chrome or Chromium binary", path, err))
	}
	return path
}

// newBrowser starts headless Chromium for the test and returns a tab's context; both end with it.
// extra are more of Chromium's options.
func newBrowser(t *testing.T, extra ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromePath(t)),
		chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.NoFirstRun,
		chromedp.WindowSize(1280, 860),
	)
	opts = append(opts, extra...)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	tab, cancelTab := chromedp.NewContext(allocCtx)
	ctx, cancelTimeout := context.WithTimeout(tab, 90*time.Second)
	t.Cleanup(func() { cancelTimeout(); cancelTab(); cancelAlloc() })
	// The page asks before it deletes: say yes, as a person would.
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for _, err := range dialogs {
			if err != nil {
				return
			}
			chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
		}
	}()
	return ctx
}

// browserPage drives the page of one test server.
type browserPage struct {
	t   *testing.T
	ctx context.Context
}

func (p browserPage) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	if err := chromedp.Do(p.ctx, actions...); err != nil {
		p.t.Fatalf("%s: %v", what, err)
	}
}

// click clicks the element that selector finds. The list is drawn again when a change arrives
// from the watch, so a row found a moment ago may be gone when the click comes: it is found again,
// as a person would find it, for up to 2 s.
func (p browserPage) click(what, selector string) {
	p.t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		err := chromedp.Do(p.ctx, chromedp.Click(chromedp.CSS(selector)))
		if err == nil {
			return
		}
		if !strings.Contains(err.Error(), "Could not find node with given id") || time.Now().After(deadline) {
			p.t.Fatalf("%s: %v", what, err)
		}
	}
}

// eval runs a JavaScript expression in the page and returns its value.
func eval[T any](p browserPage, expression string) T {
	p.t.Helper()
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[T](expression))
	if err != nil {
		p.t.Fatalf("evaluate %s: %v", expression, err)
	}
	return v
}

// waitFor polls a JavaScript condition until it is true, and fails the test with what the page
// shows if it does not become true within 10 s.
func (p browserPage) waitFor(what, condition string) {
	p.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !eval[bool](p, condition) {
		if time.Now().After(deadline) {
			p.t.Fatalf("waited 10s for %s (%s); status %q, error %q", what, condition, p.text("status"), p.text("error"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// text returns the text of the element with the id.
func (p browserPage) text(id string) string {
	return eval[string](p, fmt.Sprintf(`document.getElementById(%q).textContent`, id))
}

// names returns the names in the table, top to bottom.
func (p browserPage) names() []string {
	return eval[[]string](p, `[...document.querySelectorAll("#user-rows button.link")].map(b => b.textContent)`)
}

// fill replaces the value of a form field, as typing would.
func (p browserPage) fill(selector, value string) {
	p.t.Helper()
	p.do("fill "+selector,
		chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.querySelector(%q).value = ""`, selector)),
		chromedp.SendKeys(chromedp.CSS(selector), value))
}

// listAfter waits until the list has been drawn again after action, and returns its names.
func (p browserPage) listAfter(what string, action ...chromedp.Action[chromedp.Void]) []string {
	p.t.Helper()
	// Mark the rows on show: the page draws new rows, so the list is redrawn when none is marked.
	p.do("mark the list", chromedp.Evaluate[chromedp.Void](`document.querySelectorAll("#user-rows tr").forEach(r => r.dataset.stale = "1")`))
	p.do(what, action...)
	p.waitFor("the list to be drawn after: "+what,
		`document.querySelector("#user-rows tr") !== null && document.querySelector("#user-rows tr[data-stale]") === null`)
	return p.names()
}

// TestTheBrowserPageManagesUsers drives the page in headless Chromium through everything a person
// does with it, checking what it shows and what the service then holds.
func TestTheBrowserPageManagesUsers(t *testing.T) {
	ctx := newBrowser(t)
	s := startServer(t)
	for i, name := range []string{"Ada", "Barbara", "Claude", "Dennis", "Edsger", "Frances", "Grace", "Hedy", "Ivan", "Jean", "Ken", "Linus"} {
		s.CreateUser(t, name, []string{"engineer", "scientist", "admin"}[i%3])
	}
	rpc := s.RPCClient(apitest.RPCProtocolNamed(t, "Connect binary"), "")
	p := browserPage{t: t, ctx: ctx}

	// Each step works on what the one before left: stop at the first that fails.
	step := func(name string, f func(t *testing.T)) {
		if !t.Run(name, f) {
			t.FailNow()
		}
	}

	p.do("open the page", chromedp.Navigate(s.BaseURL+"/"))
	p.waitFor("the first page of users", `document.querySelectorAll("#user-rows tr[data-user-id]").length === 10`)
	if info := p.text("page-info"); info != "Page 1 of 2 (12 users)" {
		t.Fatalf("page info %q", info)
	}
	shot, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	shotPath := filepath.Join(t.TempDir(), "list.png")
	if err := os.WriteFile(shotPath, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot of the list view: %s", shotPath)
	if path := os.Getenv("USERS_SCREENSHOT"); path != "" { // to refresh docs/screenshot.png by hand
		os.WriteFile(path, shot, 0o644)
	}

	step("a write without a key is refused and says why", func(t *testing.T) {
		p := browserPage{t: t, ctx: ctx}
		p.fill(`#create-form input[name=name]`, "Nobody")
		p.do("submit without a key", chromedp.Click(chromedp.CSS(`#create-form button[type=submit]`)))
		p.waitFor("the key dialog", `document.getElementById("key-dialog").open`)
		p.do("cancel the dialog", chromedp.Click(chromedp.CSS(`#key-dialog button[value=cancel]`)))
		p.waitFor("the refusal", `document.getElementById("status").textContent.includes("an API key is needed")`)

		p.do("submit again", chromedp.Click(chromedp.CSS(`#create-form button[type=submit]`)))
		p.waitFor("the key dialog", `document.getElementById("key-dialog").open`)
		p.fill("#key-input", "not-the-key")
		p.do("use a wrong key", chromedp.Click(chromedp.CSS(`#key-dialog button[value=save]`)))
		p.waitFor("the refused key", `!document.getElementById("error").hidden`)
		if msg := p.text("error"); !strings.Contains(msg, "did not accept the API key") {
			t.Fatalf("error shown: %q", msg)
		}
		res, err := rpc.ListUsers(t.Context(), &usersv1.ListUsersRequest{})
		apitest.RPCMust(t, "ListUsers", err)
		if res.GetTotalCount() != 12 {
			t.Fatalf("%d users after refused creates, want 12", res.GetTotalCount())
		}
	})

	var created *usersv1.User
	step("create a user with the key", func(t *testing.T) {
		p := browserPage{t: t, ctx: ctx}
		p.fill(`#create-form input[name=name]`, "Margaret")
		p.fill(`#create-form input[name=role]`, "director")
		p.do("create", chromedp.Click(chromedp.CSS(`#create-form button[type=submit]`)))
		p.waitFor("the key dialog", `document.getElementById("key-dialog").open`)
		p.fill("#key-input", apitest.Key)
		p.do("use the key", chromedp.Click(chromedp.CSS(`#key-dialog button[value=save]`)))
		p.waitFor("the created user", `document.getElementById("status").textContent.startsWith("Created Margaret")`)
		p.waitFor("the user's panel", `document.getElementById("detail-title").textContent === "Margaret"`)
		res, err := rpc.ListUsers(t.Context(), &usersv1.ListUsersRequest{Role: "director"})
		apitest.RPCMust(t, "ListUsers", err)
		if len(res.GetUsers()) != 1 || res.GetUsers()[0].GetName() != "Margaret" {
			t.Fatalf("the service holds %v, want Margaret the director", res.GetUsers())
		}
		created = res.GetUsers()[0]
	})

	step("filter by role", func(t *testing.T) {
		p := browserPage{t: t, ctx: ctx}
		p.fill("#role-filter", "director")
		names := p.listAfter("filter", chromedp.Click(chromedp.CSS(`#filters button[type=submit]`)))
		if strings.Join(names, ",") != "Margaret" || p.text("page-info") != "Page 1 of 1 (1 user)" {
			t.Fatalf("filtered by director: %v, %q", names, p.text("page-info"))
		}
		p.fill("#role-filter", "scientist")
		names = p.listAfter("filter", chromedp.Click(chromedp.CSS(`#filters button[type=submit]`)))
		if strings.Join(names, ",") != "Barbara,Edsger,Hedy,Ken" {
			t.Fatalf("filtered by scientist: %v", names)
		}
		p.do("clear the filter", chromedp.Evaluate[chromedp.Void](`document.getElementById("role-filter").value = ""`))
		p.listAfter("unfilter", chromedp.Click(chromedp.CSS(`#filters button[type=submit]`)))
	})

	step("search names by prefix, ignoring case", func(t *testing.T) {
		p := browserPage{t: t, ctx: ctx}
		p.fill("#name-filter", "gr")
		names := p.listAfter("search", chromedp.Click(chromedp.CSS(`#filters button[type=submit]`)))
		if strings.Join(names, ",") != "Grace" {
			t.Fatalf("names starting with gr: %v", names)
		}
		p.do("clear the search", chromedp.Evaluate[chromedp.Void](`document.getElementById("name-filter").value = ""`))
		p.listAfter("unsearch", chromedp.Click(chromedp.CSS(`#filters button[type=submit]`)))
	})

	step("sort by a column, both ways, from the keyboard", func(t *testing.T) {
		p := browserPage{t: t, ctx: ctx}
		p.do("focus the Name heading", chromedp.Focus(chromedp.CSS(`button[data-sort=name]`)))
		ascending := p.listAfter("sort by name", chromedp.KeyEvent("\r"))
		want := []string{"Ada", "Barbara", "Claude", "Dennis", "Edsger", "Frances", "Grace", "Hedy", "Ivan", "Jean"}
		if strings.Join(ascending, ",") != strings.Join(want, ",") {
			t.Fatalf("sorted by name: %v", ascending)
		}
		descending := p.listAfter("sort by name again", chromedp.KeyEvent("\r"))
		if descending[0] != "Margaret" || descending[1] != "Linus" {
			t.Fatalf("sorted by name, descending: %v", descending)
		}
		if sort := eval[string](p, `document.querySelector("button[data-sort=name]").closest("th").getAttribute("aria-sort")`); sort != "descending" {
			t.Fatalf("aria-sort %q", sort)
		}
	})

	step("pages and page size", func(t *testing.T) {
		p := browserPage{t: t, ctx: ctx}
		p.listAfter("sort by id", chromedp.Click(chromedp.CSS(`button[data-sort=id]`)))
		p.do("focus the page size", chromedp.Focus(chromedp.ID("page-size")))
		p.listAfter("page size 5", chromedp.Evaluate[chromedp.Void](
			`const size = document.getElementById("page-size"); size.value = "5"; size.dispatchEvent(new Event("change"))`))
		names := p.listAfter("next page", chromedp.Click(chromedp.ID("next-page")))
		page, err := rpc.ListUsers(t.Context(), &usersv1.ListUsersRequest{Page: 2, Limit: 5})
		apitest.RPCMust(t, "ListUsers", err)
		if strings.Join(names, ",") != strings.Join(apitest.RPCNames(page.GetUsers()), ",") || p.text("page-info") != "Page 2 of 3 (13 users)" {
			t.Fatalf("page 2 of 5 shows %v (%q), the service has %v", names, p.text("page-info"), apitest.RPCNames(page.GetUsers()))
		}
		p.listAfter("last page", chromedp.Click(chromedp.ID("next-page")))
		if !eval[bool](p, `document.getElementById("next-page").disabled`) {
			t.Fatal("Next is enabled on the last page")
		}
	})

	step("the URL keeps the list and the open user: reload, Back, a link", func(t *testing.T) {
		p := browserPage{t: t, ctx: ctx}
		search := eval[string](p, `location.search`)
		if !strings.Contains(search, "limit=5") || !strings.Contains(search, "page=3") {
			t.Fatalf("the URL of page 3 of 5 a page says %q", search)
		}
		// A link (or a reload) shows what its URL says.
		p.do("mark the document", chromedp.Evaluate[chromedp.Void](`window.before = true`))
		p.do("follow a link", chromedp.Navigate(s.BaseURL+"/?sort=-name&page=2&limit=5"))
		p.waitFor("the linked page", `!window.before && document.getElementById("page-info").textContent.startsWith("Page 2 of 3")`)
		page, err := rpc.ListUsers(t.Context(), &usersv1.ListUsersRequest{Sort: "-name", Page: 2, Limit: 5})
		apitest.RPCMust(t, "ListUsers", err)
		if got, want := p.names(), apitest.RPCNames(page.GetUsers()); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("the linked page shows %v; the service has %v", got, want)
		}
		// Opening a user is a step of its own: Back closes it, Forward opens it again.
		p.click("open a user", `#user-rows tr[data-user-id] button.link`)
		p.waitFor("the user's panel", `!document.getElementById("detail").hidden && location.search.includes("user=")`)
		p.do("go back", chromedp.NavigateBack())
		p.waitFor("the panel closed", `document.getElementById("detail").hidden && !location.search.includes("user=")`)
		p.do("go forward", chromedp.NavigateForward())
		p.waitFor("the panel open again", `!document.getElementById("detail").hidden`)
		// So is a page: Back shows the one before.
		p.do("close the panel", chromedp.Click(chromedp.ID("close-detail")))
		p.listAfter("the next page", chromedp.Click(chromedp.ID("next-page")))
		p.do("go back", chromedp.NavigateBack())
		p.waitFor("page 2 again", `document.getElementById("page-info").textContent.startsWith("Page 2 of 3") && location.search.includes("page=2")`)
		p.do("mark the document", chromedp.Evaluate[chromedp.Void](`window.before = true`))
		p.do("back to the last page by id", chromedp.Navigate(s.BaseURL+"/?page=3&limit=5"))
		p.waitFor("the last page", `!window.before && document.getElementById("page-info").textContent.startsWith("Page 3 of 3")`)
	})

	step("edit a user, add a post", func(t *testing.T) {
		p := browserPage{t: t, ctx: ctx}
		p.click("open Margaret", fmt.Sprintf(`tr[data-user-id="%d"] button.link`, created.GetId()))
		p.waitFor("the user's panel", `!document.getElementById("detail").hidden && document.getElementById("detail-title").textContent === "Margaret"`)
		p.fill(`#edit-form input[name=role]`, "chief engineer")
		p.do("save", chromedp.Click(chromedp.CSS(`#edit-form button[type=submit]`)))
		p.waitFor("the save", `document.getElementById("status").textContent === "Saved Margaret."`)
		if u := apitest.RPCGet(t, rpc, created.GetId()); u.GetRole() != "chief engineer" || u.GetEtag() == created.GetEtag() {
			t.Fatalf("after the edit the service holds %v", u)
		}

		p.fill(`#post-form input[name=title]`, "Apollo 11")
		p.fill(`#post-form textarea[name=body]`, "The guidance software worked.")
		p.do("add the post", chromedp.Click(chromedp.CSS(`#post-form button[type=submit]`)))
		p.waitFor("the post in the list", `document.getElementById("posts").textContent.includes("Apollo 11")`)
		posts, err := rpc.ListUserPosts(t.Context(), &usersv1.ListUserPostsRequest{UserId: created.GetId()})
		apitest.RPCMust(t, "ListUserPosts", err)
		if len(posts.GetPosts()) != 1 || posts.GetPosts()[0].GetBody() != "The guidance software worked." {
			t.Fatalf("the service holds the posts %v", posts.GetPosts())
		}
	})

	other := s.RPCClient(apitest.RPCProtocolNamed(t, "Connect binary"), apitest.Key)
	step("a change elsewhere refreshes the open form while nothing is typed in it", func(t *testing.T) {
		p := browserPage{t: t, ctx: ctx}
		_, err := other.UpdateUser(t.Context(), &usersv1.UpdateUserRequest{Id: created.GetId(), User: &usersv1.User{Role: "navigator"}})
		apitest.RPCMust(t, "UpdateUser", err)
		p.waitFor("the new role in the form", `document.querySelector("#edit-form input[name=role]").value === "navigator"`)
		if meta := p.text("detail-meta"); !strings.Contains(meta, "just changed elsewhere") {
			t.Fatalf("the panel says %q", meta)
		}
	})

	step("a service error is shown in words: an edit that lost a race", func(t *testing.T) {
		p := browserPage{t: t, ctx: ctx}
		// The person types; someone else changes the user meanwhile: the form is flagged, not redrawn.
		p.fill(`#edit-form input[name=role]`, "mine")
		_, err := other.UpdateUser(t.Context(), &usersv1.UpdateUserRequest{Id: created.GetId(), User: &usersv1.User{Role: "elsewhere"}})
		apitest.RPCMust(t, "UpdateUser", err)
		p.waitFor("the flag", `document.getElementById("detail-meta").textContent.includes("changed elsewhere since you opened it")`)
		if role := eval[string](p, `document.querySelector("#edit-form input[name=role]").value`); role != "mine" {
			t.Fatalf("the form was redrawn under the typing: role %q", role)
		}
		p.do("save", chromedp.Click(chromedp.CSS(`#edit-form button[type=submit]`)))
		p.waitFor("the error", `!document.getElementById("error").hidden`)
		if msg := p.text("error"); !strings.Contains(msg, "Someone changed this user") {
			t.Fatalf("error shown: %q", msg)
		}
		if u := apitest.RPCGet(t, rpc, created.GetId()); u.GetRole() != "elsewhere" {
			t.Fatalf("the stale save changed the user: %v", u)
		}
		p.waitFor("the reloaded user", `document.querySelector("#edit-form input[name=role]").value === "elsewhere"`)

		// A later success clears the error.
		p.fill(`#edit-form input[name=role]`, "mine")
		p.do("save again", chromedp.Click(chromedp.CSS(`#edit-form button[type=submit]`)))
		p.waitFor("the save", `document.getElementById("status").textContent === "Saved Margaret."`)
		if !eval[bool](p, `document.getElementById("error").hidden`) {
			t.Fatalf("the error %q is still shown after a save that worked", p.text("error"))
		}
	})

	step("posts page by page", func(t *testing.T) {
		p := browserPage{t: t, ctx: ctx}
		for i := range 25 {
			_, err := other.CreateUserPost(t.Context(), &usersv1.CreateUserPostRequest{UserId: created.GetId(), Post: &usersv1.Post{Title: fmt.Sprintf("note %d", i)}})
			apitest.RPCMust(t, "CreateUserPost", err)
		}
		p.do("open Margaret from a link", chromedp.Navigate(fmt.Sprintf("%s/?user=%d", s.BaseURL, created.GetId())))
		p.waitFor("the first page of posts", `document.querySelectorAll("#posts li").length === 20 && !document.getElementById("more-posts").hidden`)
		p.do("more posts", chromedp.Click(chromedp.ID("more-posts")))
		p.waitFor("every post", `document.querySelectorAll("#posts li").length === 26 && document.getElementById("more-posts").hidden`)
	})

	step("delete a user", func(t *testing.T) {
		p := browserPage{t: t, ctx: ctx}
		p.do("delete", chromedp.Click(chromedp.ID("delete-user")))
		// The server keeps deleted users (the default -deleted-retention): the page says until when.
		p.waitFor("the delete", `document.getElementById("status").textContent.startsWith("Deleted Margaret; \"Deleted users too\" lists them, to undelete until ")`)
		_, err := rpc.GetUser(t.Context(), &usersv1.GetUserRequest{Id: created.GetId()})
		if connect.CodeOf(err) != connect.CodeNotFound {
			t.Fatalf("after the delete GetUser says %v", err)
		}
		if !eval[bool](p, `document.getElementById("detail").hidden`) {
			t.Fatal("the deleted user's panel is still open")
		}
	})
}
