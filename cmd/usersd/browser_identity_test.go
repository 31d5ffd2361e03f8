package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"usersd/internal/apitest"
)

// TestTheBrowserPageEditsIdentities drives the page's identity fields (issue 37) in headless
// Chromium: a user created with a user name, an email, a label and unchecked Active shows them in
// the list and the form; an edit of the email and the removal of the label reach the service; and a
// user name another user has is refused in words; the user deleted from its panel is listed with
// "Deleted users too" and restored from its row; Find looks a user up by login name or email, and
// Filter takes an AIP-160 filter, both kept in the URL.
func TestTheBrowserPageEditsIdentities(t *testing.T) {
	ctx := newBrowser(t)
	s := startServer(t)
	s.CreateUser(t, "Ada", "engineer")
	p := browserPage{t: t, ctx: ctx}

	step := func(name string, f func(t *testing.T)) {
		if !t.Run(name, f) {
			t.FailNow()
		}
	}
	// get reads a user over REST, as the service holds it.
	get := func(t *testing.T, id int) map[string]any {
		t.Helper()
		res := s.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: fmt.Sprintf("/users/%d", id)})
		if res.Status != http.StatusOK {
			t.Fatalf("GET /users/%d: %d %s", id, res.Status, res.Body)
		}
		var u map[string]any
		if err := json.Unmarshal(res.Body, &u); err != nil {
			t.Fatalf("GET /users/%d: %v: %s", id, err, res.Body)
		}
		return u
	}

	p.do("open the page", chromedp.Navigate(s.BaseURL+"/"))
	p.waitFor("the list", `document.querySelectorAll("#user-rows tr[data-user-id]").length === 1`)
	p.do("give the key", chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`sessionStorage.setItem("usersd.apiKey", %q)`, apitest.Key)))

	var id int
	step("create a user with a user name, an email, a label, inactive", func(t *testing.T) {
		p := browserPage{t: t, ctx: ctx}
		p.fill(`#create-form input[name=name]`, "Grace Hopper")
		p.fill(`#create-form input[name=userName]`, "grace")
		p.fill(`#create-form input[name=email]`, "grace@example.com")
		p.fill(`#create-form input[name=givenName]`, "Grace")
		p.fill(`#create-form input[name=familyName]`, "Hopper")
		p.fill(`#create-form input[name=externalId]`, "ext-1906")
		p.do("uncheck Active", chromedp.Click(chromedp.CSS(`#create-form input[name=active]`)))
		p.do("add a label", chromedp.Click(chromedp.ID("create-add-label")))
		p.fill(`#create-labels .label-row input[name=label-key]`, "team")
		p.fill(`#create-labels .label-row input[name=label-value]`, "cobol")
		p.do("create", chromedp.Click(chromedp.CSS(`#create-form button[type=submit]`)))
		p.waitFor("the created user", `document.getElementById("status").textContent.startsWith("Created Grace Hopper")`)
		p.waitFor("the user's panel", `!document.getElementById("detail").hidden && document.getElementById("detail-title").textContent === "Grace Hopper"`)
		if n := eval[int](p, `document.querySelectorAll("#create-labels .label-row").length`); n != 0 {
			t.Fatalf("the create form keeps %d label rows after the create", n)
		}
		id = eval[int](p, `Number(new URLSearchParams(location.search).get("user"))`)

		// The list shows the user name, the email and that the user is inactive.
		p.waitFor("the row", fmt.Sprintf(`document.querySelector('#user-rows tr[data-user-id="%d"]') !== null`, id))
		row := eval[string](p, fmt.Sprintf(`document.querySelector('#user-rows tr[data-user-id="%d"]').textContent`, id))
		for _, want := range []string{"grace", "grace@example.com", "inactive"} {
			if !strings.Contains(row, want) {
				t.Fatalf("the row %q does not show %q", row, want)
			}
		}
		// The form shows every field.
		form := eval[map[string]any](p, `(() => {
			const f = document.getElementById("edit-form");
			const rows = [...document.querySelectorAll("#edit-labels .label-row")];
			return {userName: f.userName.value, email: f.email.value, givenName: f.givenName.value, familyName: f.familyName.value,
				externalId: f.externalId.value, active: f.active.checked,
				labels: rows.map(r => r.querySelector("input[name=label-key]").value + "=" + r.querySelector("input[name=label-value]").value).join(",")};
		})()`)
		want := map[string]any{"userName": "grace", "email": "grace@example.com", "givenName": "Grace", "familyName": "Hopper",
			"externalId": "ext-1906", "active": false, "labels": "team=cobol"}
		if fmt.Sprint(form) != fmt.Sprint(want) {
			t.Fatalf("the form shows %v, want %v", form, want)
		}
		if meta := p.text("detail-meta"); !strings.Contains(meta, "inactive") {
			t.Fatalf("the panel says %q", meta)
		}
		// Every input of the form has a label.
		if unlabelled := eval[int](p, `[...document.querySelectorAll("#create-form input, #edit-form input")].filter(i => i.labels.length === 0).length`); unlabelled != 0 {
			t.Fatalf("%d inputs without a label", unlabelled)
		}

		u := get(t, id)
		if u["userName"] != "grace" || u["email"] != "grace@example.com" || u["givenName"] != "Grace" || u["familyName"] != "Hopper" ||
			u["externalId"] != "ext-1906" || u["active"] != false || fmt.Sprint(u["labels"]) != "map[team:cobol]" {
			t.Fatalf("the service holds %v", u)
		}
	})

	step("edit the email, remove the label", func(t *testing.T) {
		p := browserPage{t: t, ctx: ctx}
		p.fill(`#edit-form input[name=email]`, "amazing.grace@example.com")
		p.do("remove the label", chromedp.Click(chromedp.CSS(`#edit-labels .label-row button[aria-label="Remove the label team"]`)))
		p.do("save", chromedp.Click(chromedp.CSS(`#edit-form button[type=submit]`)))
		p.waitFor("the save", `document.getElementById("status").textContent === "Saved Grace Hopper."`)
		u := get(t, id)
		if u["email"] != "amazing.grace@example.com" || len(asMap(u["labels"])) != 0 || u["userName"] != "grace" || u["active"] != false {
			t.Fatalf("after the edit the service holds %v", u)
		}
		p.waitFor("the new email in the list", fmt.Sprintf(`document.querySelector('#user-rows tr[data-user-id="%d"]')?.textContent.includes("amazing.grace@example.com")`, id))
		if n := eval[int](p, `document.querySelectorAll("#edit-labels .label-row").length`); n != 0 {
			t.Fatalf("the form shows %d labels after the removal", n)
		}
	})

	step("a user name another user has is refused in words", func(t *testing.T) {
		p := browserPage{t: t, ctx: ctx}
		p.fill(`#create-form input[name=name]`, "Someone Else")
		p.fill(`#create-form input[name=userName]`, "GRACE")
		p.do("create", chromedp.Click(chromedp.CSS(`#create-form button[type=submit]`)))
		p.waitFor("the error", `!document.getElementById("error").hidden`)
		msg := p.text("error")
		if !strings.Contains(msg, "Another user already has that value") || !strings.Contains(msg, "user_name") {
			t.Fatalf("error shown: %q", msg)
		}
		if ids := s.ListIDs(t); len(ids) != 2 {
			t.Fatalf("the service holds users %v after the refused create", ids)
		}
	})

	step("delete the user, list deleted users, undelete it", func(t *testing.T) {
		p := browserPage{t: t, ctx: ctx}
		p.do("answer the confirmation yes", chromedp.Evaluate[chromedp.Void](`window.confirm = () => true`))
		p.do("delete", chromedp.Click(chromedp.ID("delete-user")))
		p.waitFor("the delete", `document.getElementById("status").textContent.startsWith("Deleted Grace Hopper")`)
		p.waitFor("the row gone", fmt.Sprintf(`document.querySelector('#user-rows tr[data-user-id="%d"]') === null`, id))
		if res := s.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: fmt.Sprintf("/users/%d", id)}); res.Status != http.StatusNotFound {
			t.Fatalf("the deleted user reads %d %s", res.Status, res.Body)
		}

		p.do("show deleted users", chromedp.Click(chromedp.ID("show-deleted")))
		deletedRow := fmt.Sprintf(`#user-rows tr.deleted[data-user-id="%d"]`, id)
		p.waitFor("the deleted row", fmt.Sprintf(`document.querySelector('%s') !== null`, deletedRow))
		if row := eval[string](p, fmt.Sprintf(`document.querySelector('%s').textContent`, deletedRow)); !strings.Contains(row, "deleted · purged") {
			t.Fatalf("the deleted row says %q", row)
		}
		if url := eval[string](p, `location.search`); !strings.Contains(url, "deleted=1") {
			t.Fatalf("the URL %q does not keep the choice", url)
		}
		p.do("undelete", chromedp.Click(chromedp.CSS(`button[aria-label="Undelete Grace Hopper"]`)))
		p.waitFor("the restore", `document.getElementById("status").textContent === "Restored Grace Hopper."`)
		p.waitFor("the live row", fmt.Sprintf(`document.querySelector('#user-rows tr[data-user-id="%d"]:not(.deleted)') !== null`, id))
		if u := get(t, id); u["deleteTime"] != nil || u["email"] != "amazing.grace@example.com" {
			t.Fatalf("after the undelete the service holds %v", u)
		}
		p.do("hide deleted users", chromedp.Click(chromedp.ID("show-deleted")))
	})

	step("find a user by login name or email, and filter", func(t *testing.T) {
		p := browserPage{t: t, ctx: ctx}
		rowIDs := `[...document.querySelectorAll("#user-rows tr[data-user-id]")].map(r => Number(r.dataset.userId)).join(",")`
		for _, find := range []string{"GRACE", "Amazing.Grace@Example.com"} {
			p.fill(`#find`, find)
			p.do("find", chromedp.Click(chromedp.CSS(`#filters button[type=submit]`)))
			p.waitFor("the one user found", fmt.Sprintf(`%s === "%d"`, rowIDs, id))
			if url := eval[string](p, `location.search`); !strings.Contains(url, "find=") {
				t.Fatalf("the URL %q does not keep the search", url)
			}
		}
		p.fill(`#find`, "")
		p.fill(`#filter`, `role = "engineer"`)
		p.do("filter", chromedp.Click(chromedp.CSS(`#filters button[type=submit]`)))
		p.waitFor("Ada alone", `document.querySelectorAll("#user-rows tr[data-user-id]").length === 1 && document.getElementById("user-rows").textContent.includes("Ada")`)
		p.do("reload", chromedp.Reload())
		p.waitFor("the filter kept by the URL", `document.getElementById("filter").value === 'role = "engineer"' && document.querySelectorAll("#user-rows tr[data-user-id]").length === 1`)
		p.fill(`#filter`, `colour = "red"`)
		p.do("a bad filter", chromedp.Click(chromedp.CSS(`#filters button[type=submit]`)))
		p.waitFor("the error", `!document.getElementById("error").hidden`)
		if msg := p.text("error"); !strings.Contains(msg, "colour") {
			t.Fatalf("a bad filter shows %q", msg)
		}
	})
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}
