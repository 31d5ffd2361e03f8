package scim_test

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// wantClientAnswer fails unless a is a success or a client error in SCIM's error schema: no input
// reaches a 500.
func wantClientAnswer(t *testing.T, what string, a answer) {
	t.Helper()
	if a.status >= 500 {
		t.Fatalf("%s: %d %s", what, a.status, a.raw)
	}
	if a.status >= 400 && !isErrorSchema(a.body) {
		t.Fatalf("%s: %d without SCIM's error schema: %s", what, a.status, a.raw)
	}
}

func isErrorSchema(body map[string]any) bool {
	schemas, _ := body["schemas"].([]any)
	status, _ := body["status"].(string)
	return len(schemas) == 1 && schemas[0] == "urn:ietf:params:scim:api:messages:2.0:Error" && status != ""
}

// FuzzSCIMFilter sends filters to GET /scim/v2/Users of a server over a SQLite file: each is a
// list or a 400 invalidFilter (or invalidValue), never a 500, and a 200 is a ListResponse whose
// totalResults counts what it holds.
func FuzzSCIMFilter(f *testing.F) {
	for _, seed := range []string{
		`userName eq "ada@example.com"`, `emails[type eq "work" and value co "@example.com"]`,
		`emails[type eq "work"].value eq "ada@example.com"`, `meta.lastModified gt "2026-11-27T00:00:00Z"`,
		`not (active eq false) or (name.givenName sw "A" and externalId pr)`, `id eq "7"`, `id gt "x"`,
		`((((userName eq "a"))))`, `userName regex "x"`, `active gt true`, `roles[value eq "admin"]`,
		`urn:ietf:params:scim:schemas:core:2.0:User:userName ew "COM"`, `meta.resourceType eq "User"`,
		`displayName co "\u0000"`, `emails.type eq "home" or emails.primary eq true`,
	} {
		f.Add(seed)
	}
	s := startServer(f, filepath.Join(f.TempDir(), "users.db"))
	for _, u := range []string{`"userName":"ada@example.com","emails":[{"value":"ada@example.com"}],"name":{"givenName":"Ada"}`,
		`"userName":"bob","active":false,"roles":[{"value":"admin"}]`} {
		res := doWith(f, s, "POST", "/scim/v2/Users", `{`+userSchema+`,`+u+`}`)
		if res.status != http.StatusCreated {
			f.Fatalf("seed user: %d %s", res.status, res.raw)
		}
	}
	f.Fuzz(func(t *testing.T, filter string) {
		a := doWith(t, s, "GET", filterQuery(filter), "")
		wantClientAnswer(t, "filter "+filter, a)
		if a.status == http.StatusOK {
			resources, _ := a.body["Resources"].([]any)
			var total int
			if err := json.Unmarshal([]byte(str(a.body, "totalResults")), &total); err != nil || total != len(resources) {
				t.Fatalf("filter %q: totalResults %v, %d resources", filter, a.body["totalResults"], len(resources))
			}
		}
	})
}

// FuzzSCIMPatch sends PATCH bodies to a user: each is a 200 or a 4xx in SCIM's error schema, never
// a 500; a refused one leaves the user as it was.
func FuzzSCIMPatch(f *testing.F) {
	for _, seed := range []string{
		`{` + patchSchema + `,"Operations":[{"op":"Replace","path":"active","value":"False"}]}`,
		`{` + patchSchema + `,"Operations":[{"op":"replace","path":"emails[type eq \"work\"].value","value":"x@example.com"}]}`,
		`{` + patchSchema + `,"Operations":[{"op":"replace","value":{"displayName":"X","name":{"givenName":"Y"}}}]}`,
		`{` + patchSchema + `,"Operations":[{"op":"add","path":"emails","value":[{"value":"a@b.c","primary":true}]}]}`,
		`{` + patchSchema + `,"Operations":[{"op":"remove","path":"name.familyName"},{"op":"remove","path":"roles"}]}`,
		`{` + patchSchema + `,"Operations":[{"op":"replace","path":"userName","value":17}]}`,
		`{` + patchSchema + `,"Operations":[]}`, `{"Operations":[{"op":"add"}]}`, `[]`, `{`,
	} {
		f.Add(seed)
	}
	s := startServer(f, filepath.Join(f.TempDir(), "users.db"))
	created := doWith(f, s, "POST", "/scim/v2/Users", `{`+userSchema+`,"userName":"fuzz@example.com"}`)
	if created.status != http.StatusCreated {
		f.Fatalf("seed user: %d %s", created.status, created.raw)
	}
	path := "/scim/v2/Users/" + str(created.body, "id")
	f.Fuzz(func(t *testing.T, body string) {
		before := doWith(t, s, "GET", path, "")
		a := doWith(t, s, "PATCH", path, body)
		wantClientAnswer(t, "PATCH "+body, a)
		if a.status >= 400 {
			after := doWith(t, s, "GET", path, "")
			if after.header.Get("ETag") != before.header.Get("ETag") {
				t.Fatalf("a refused PATCH (%d) changed the user: %s", a.status, body)
			}
		}
		if a.status == http.StatusOK && !strings.HasPrefix(str(a.body, "meta.version"), `W/"`) {
			t.Fatalf("PATCH %s: %s", body, a.raw)
		}
	})
}

// doWith is s.do reporting to tb, for a server that outlives the test that started it.
func doWith(tb testing.TB, s *server, method, path, body string) answer {
	tb.Helper()
	return (&server{t: tb, base: s.base}).do(method, path, body)
}
