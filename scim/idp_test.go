package scim_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

const userSchema = `"schemas":["urn:ietf:params:scim:schemas:core:2.0:User"]`
const patchSchema = `"schemas":["urn:ietf:params:scim:api:messages:2.0:PatchOp"]`

// filterQuery is a list's query string with filter, as identity providers escape it.
func filterQuery(filter string, rest ...string) string {
	q := url.Values{"filter": {filter}}
	for i := 0; i+1 < len(rest); i += 2 {
		q.Set(rest[i], rest[i+1])
	}
	return "/scim/v2/Users?" + q.Encode()
}

// TestEntraIDProvisionsAUser sends the requests Microsoft Entra ID's provisioning service sends, as
// it sends them: the look-up by userName before a create, the create, a PATCH with "Replace" and
// "active": "False", the work email's value path, a replace without a path, the delete after the
// disable. Each change shows on REST too.
func TestEntraIDProvisionsAUser(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *server) {
		lookUp := s.do("GET", filterQuery(`userName eq "ada.lovelace@contoso.com"`, "startIndex", "1", "count", "1"), "").want(t, http.StatusOK)
		if str(lookUp.body, "totalResults") != "0" || str(lookUp.body, "Resources") != "[]" {
			t.Fatalf("look-up before the create: %s", lookUp.raw)
		}
		created := s.do("POST", "/scim/v2/Users", `{`+userSchema+`,"externalId":"0a1b2c3d","userName":"ada.lovelace@contoso.com",
			"active":true,"displayName":"Ada Lovelace","emails":[{"primary":true,"type":"work","value":"ada.lovelace@contoso.com"}],
			"meta":{"resourceType":"User"},"name":{"formatted":"Ada Lovelace","familyName":"Lovelace","givenName":"Ada"},"roles":[]}`).
			want(t, http.StatusCreated)
		id := str(created.body, "id")
		if created.header.Get("Location") != s.base+"/scim/v2/Users/"+id || str(created.body, "meta.location") != created.header.Get("Location") {
			t.Errorf("Location %q, meta.location %q", created.header.Get("Location"), str(created.body, "meta.location"))
		}
		if str(created.body, "meta.created") != str(created.body, "meta.lastModified") || created.header.Get("ETag") != str(created.body, "meta.version") {
			t.Errorf("meta %v, ETag %q", created.body["meta"], created.header.Get("ETag"))
		}
		found := s.do("GET", filterQuery(`userName eq "ADA.LOVELACE@contoso.com"`, "startIndex", "1", "count", "1"), "").want(t, http.StatusOK)
		if str(found.body, "totalResults") != "1" || str(found.body, "Resources.0.id") != id {
			t.Fatalf("look-up ignoring case: %s", found.raw)
		}

		s.do("PATCH", "/scim/v2/Users/"+id, `{`+patchSchema+`,"Operations":[
			{"op":"Replace","path":"emails[type eq \"work\"].value","value":"ada@contoso.com"},
			{"op":"Replace","path":"name.familyName","value":"King"}]}`).want(t, http.StatusOK)
		s.do("PATCH", "/scim/v2/Users/"+id, `{`+patchSchema+`,"Operations":[
			{"op":"replace","value":{"displayName":"Ada King","name.givenName":"Augusta","externalId":"0a1b2c3e"}}]}`).want(t, http.StatusOK)
		disabled := s.do("PATCH", "/scim/v2/Users/"+id, `{`+patchSchema+`,"Operations":[{"op":"Replace","path":"active","value":"False"}]}`).
			want(t, http.StatusOK)
		for path, want := range map[string]string{"active": "false", "emails.0.value": "ada@contoso.com", "emails.0.type": "work",
			"name.familyName": "King", "name.givenName": "Augusta", "displayName": "Ada King", "externalId": "0a1b2c3e"} {
			if got := str(disabled.body, path); got != want {
				t.Errorf("after the patches, %s = %q, want %q", path, got, want)
			}
		}
		rest := s.do("GET", "/users/"+id, "").want(t, http.StatusOK)
		for path, want := range map[string]string{"active": "false", "email": "ada@contoso.com", "familyName": "King",
			"givenName": "Augusta", "name": "Ada King", "externalId": "0a1b2c3e", "userName": "ada.lovelace@contoso.com"} {
			if got := str(rest.body, path); got != want {
				t.Errorf("on REST, %s = %q, want %q", path, got, want)
			}
		}

		s.do("POST", "/scim/v2/Users", `{`+userSchema+`,"userName":"Ada.Lovelace@contoso.com"}`).wantError(t, http.StatusConflict, "uniqueness")
		s.do("DELETE", "/scim/v2/Users/"+id, "").want(t, http.StatusNoContent)
		s.do("GET", "/scim/v2/Users/"+id, "").wantError(t, http.StatusNotFound, "")
		gone := s.do("GET", filterQuery(`userName eq "ada.lovelace@contoso.com"`), "").want(t, http.StatusOK)
		if str(gone.body, "totalResults") != "0" {
			t.Errorf("a deleted user is found: %s", gone.raw)
		}
	})
}

// TestEntraIDAddsAWorkEmailToAUserWithout: Entra ID adds a work email through its value path; a
// replace through a value path that matches no value has no target.
func TestEntraIDAddsAWorkEmailToAUserWithout(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *server) {
		id := str(s.do("POST", "/scim/v2/Users", `{`+userSchema+`,"userName":"grace"}`).want(t, http.StatusCreated).body, "id")
		added := s.do("PATCH", "/scim/v2/Users/"+id, `{`+patchSchema+`,"Operations":[{"op":"Add","path":"emails[type eq \"work\"].value","value":"grace@contoso.com"}]}`).
			want(t, http.StatusOK)
		if str(added.body, "emails.0.value") != "grace@contoso.com" {
			t.Errorf("after the add: %s", added.raw)
		}
		s.do("PATCH", "/scim/v2/Users/"+id, `{`+patchSchema+`,"Operations":[{"op":"replace","path":"emails[type eq \"home\"].value","value":"x@y.z"}]}`).
			wantError(t, http.StatusBadRequest, "noTarget")
		if got := str(s.do("GET", "/scim/v2/Users/"+id, "").body, "displayName"); got != "" {
			t.Errorf("a user created without a displayName shows %q", got)
		}
	})
}

// TestOktaUpdatesByPut sends Okta's requests: its filter=userName eq look-up, the create, and
// updates as a whole user with PUT, the last one disabling the user; If-Match is honoured.
func TestOktaUpdatesByPut(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *server) {
		s.do("GET", filterQuery(`userName eq "isaac.brock@example.com"`, "startIndex", "1", "count", "2"), "").want(t, http.StatusOK)
		created := s.do("POST", "/scim/v2/Users", `{`+userSchema+`,"userName":"isaac.brock@example.com",
			"name":{"givenName":"Isaac","familyName":"Brock"},"emails":[{"primary":true,"value":"isaac.brock@example.com","type":"work"}],
			"displayName":"Isaac Brock","locale":"en-US","externalId":"00ujl29u0le5T6Aj10h7","groups":[],"password":"1mz050nq","active":true}`).
			want(t, http.StatusCreated)
		id := str(created.body, "id")
		if strings.Contains(string(created.raw), "password") || strings.Contains(string(created.raw), "locale") {
			t.Errorf("the create answers what usersd does not keep: %s", created.raw)
		}
		put := `{` + userSchema + `,"id":"` + id + `","userName":"isaac.brock@example.com","name":{"givenName":"Isaac","familyName":"Brock-Smith"},
			"emails":[{"primary":true,"value":"isaac@example.com","type":"work"}],"displayName":"Isaac Brock-Smith","active":%s}`
		s.do("PUT", "/scim/v2/Users/"+id, strings.Replace(put, "%s", "true", 1), "If-Match", `W/"999"`).wantError(t, http.StatusPreconditionFailed, "")
		replaced := s.do("PUT", "/scim/v2/Users/"+id, strings.Replace(put, "%s", "true", 1), "If-Match", created.header.Get("ETag")).want(t, http.StatusOK)
		if str(replaced.body, "name.familyName") != "Brock-Smith" || str(replaced.body, "emails.0.value") != "isaac@example.com" ||
			str(replaced.body, "externalId") != "" {
			t.Errorf("after the PUT (which leaves externalId out): %s", replaced.raw)
		}
		disabled := s.do("PUT", "/scim/v2/Users/"+id, strings.Replace(put, "%s", "false", 1)).want(t, http.StatusOK)
		if str(disabled.body, "active") != "false" {
			t.Errorf("after the disabling PUT: %s", disabled.raw)
		}
		s.do("PUT", "/scim/v2/Users/424242", strings.Replace(put, "%s", "true", 1)).wantError(t, http.StatusNotFound, "")
		s.do("PUT", "/scim/v2/Users/"+id, `{`+userSchema+`,"displayName":"No userName"}`).wantError(t, http.StatusBadRequest, "invalidValue")
	})
}

// TestBadSCIMInputIsRefusedAndChangesNothing: every kind of bad input is a 4xx in SCIM's error
// schema, and the user it was about is as it was.
func TestBadSCIMInputIsRefusedAndChangesNothing(t *testing.T) {
	s := startServer(t, t.TempDir()+"/users.db")
	created := s.do("POST", "/scim/v2/Users", `{`+userSchema+`,"userName":"linus","displayName":"Linus"}`).want(t, http.StatusCreated)
	id := str(created.body, "id")
	for _, c := range []struct {
		name, method, path, body string
		status                   int
		scimType                 string
		headers                  []string
	}{
		{"malformed JSON", "POST", "/scim/v2/Users", `{"schemas":`, 400, "invalidSyntax", nil},
		{"wrong type", "POST", "/scim/v2/Users", `{` + userSchema + `,"userName":5}`, 400, "invalidValue", nil},
		{"not a boolean", "PATCH", "/scim/v2/Users/" + id, `{` + patchSchema + `,"Operations":[{"op":"replace","path":"active","value":"maybe"}]}`, 400, "invalidValue", nil},
		{"no schemas", "POST", "/scim/v2/Users", `{"userName":"x"}`, 400, "invalidValue", nil},
		{"bad email", "POST", "/scim/v2/Users", `{` + userSchema + `,"userName":"x","emails":[{"value":"not an email"}]}`, 400, "invalidValue", nil},
		{"unknown filter attribute", "GET", filterQuery(`nickName eq "x"`), "", 400, "invalidFilter", nil},
		{"unknown filter operator", "GET", filterQuery(`userName regex "x"`), "", 400, "invalidFilter", nil},
		{"unbalanced filter", "GET", filterQuery(`(((`), "", 400, "invalidFilter", nil},
		{"boolean ordered", "GET", filterQuery(`active gt true`), "", 400, "invalidFilter", nil},
		{"filter of the wrong type", "GET", filterQuery(`meta.lastModified gt "yesterday"`), "", 400, "invalidFilter", nil},
		{"bad patch path", "PATCH", "/scim/v2/Users/" + id, `{` + patchSchema + `,"Operations":[{"op":"replace","path":"[[","value":"x"}]}`, 400, "invalidPath", nil},
		{"unknown patch attribute", "PATCH", "/scim/v2/Users/" + id, `{` + patchSchema + `,"Operations":[{"op":"replace","path":"shoeSize","value":"x"}]}`, 400, "invalidPath", nil},
		{"read-only attribute", "PATCH", "/scim/v2/Users/" + id, `{` + patchSchema + `,"Operations":[{"op":"replace","path":"displayName","value":"Changed"},{"op":"replace","path":"id","value":"7"}]}`, 400, "mutability", nil},
		{"remove userName", "PATCH", "/scim/v2/Users/" + id, `{` + patchSchema + `,"Operations":[{"op":"remove","path":"userName"}]}`, 400, "mutability", nil},
		{"unknown op", "PATCH", "/scim/v2/Users/" + id, `{` + patchSchema + `,"Operations":[{"op":"move","path":"userName","value":"x"}]}`, 400, "invalidValue", nil},
		{"oversize", "POST", "/scim/v2/Users", `{` + userSchema + `,"userName":"` + strings.Repeat("x", 1<<20) + `"}`, 413, "", nil},
		{"no credential", "POST", "/scim/v2/Users", `{` + userSchema + `,"userName":"x"}`, 401, "", []string{"Authorization", ""}},
		{"read-only key", "PATCH", "/scim/v2/Users/" + id, `{` + patchSchema + `,"Operations":[{"op":"replace","path":"displayName","value":"Changed"}]}`, 403, "", []string{"Authorization", "Bearer " + readKey}},
		{"not an id", "GET", "/scim/v2/Users/nonexistent-3fa1b2c4", "", 404, "", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := s.do(c.method, c.path, c.body, c.headers...)
			a.wantError(t, c.status, c.scimType)
			if c.status == http.StatusUnauthorized && a.header.Get("WWW-Authenticate") == "" {
				t.Error("a 401 without WWW-Authenticate")
			}
		})
	}
	after := s.do("GET", "/scim/v2/Users/"+id, "").want(t, http.StatusOK)
	if after.header.Get("ETag") != created.header.Get("ETag") || str(after.body, "displayName") != "Linus" {
		t.Errorf("the refused requests changed the user: %s", after.raw)
	}
	if total := str(s.do("GET", "/scim/v2/Users", "").body, "totalResults"); total != "1" {
		t.Errorf("the refused creates left %s users, want 1", total)
	}
}

// TestEntraIDsDefaultMappingIsAcceptedWhole: Entra ID's default attribute mapping also sends
// attributes usersd does not keep (phone numbers, addresses, the enterprise extension) in the same
// PATCH as those it keeps; they are accepted and dropped, and the rest applies. Its role path
// compares primary with the string "True".
func TestEntraIDsDefaultMappingIsAcceptedWhole(t *testing.T) {
	s := startServer(t, t.TempDir()+"/users.db")
	id := str(s.do("POST", "/scim/v2/Users", `{`+userSchema+`,"userName":"alan","roles":[{"value":"viewer","primary":true}],
		"urn:ietf:params:scim:schemas:extension:enterprise:2.0:User":{"department":"Huts"}}`).want(t, http.StatusCreated).body, "id")
	res := s.do("PATCH", "/scim/v2/Users/"+id, `{`+patchSchema+`,"Operations":[
		{"op":"Add","path":"phoneNumbers[type eq \"work\"].value","value":"+44 20 7946 0000"},
		{"op":"Add","path":"addresses[type eq \"work\"].formatted","value":"Bletchley Park"},
		{"op":"Add","path":"urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:department","value":"Hut 8"},
		{"op":"Replace","path":"roles[primary eq \"True\"].value","value":"admin"},
		{"op":"Add","value":{"title":"Cryptanalyst","urn:ietf:params:scim:schemas:extension:enterprise:2.0:User":{"manager":{"value":"7"}}}},
		{"op":"Replace","path":"active","value":"False"}]}`).want(t, http.StatusOK)
	if str(res.body, "active") != "false" || str(res.body, "roles.0.value") != "admin" {
		t.Errorf("after Entra's PATCH: %s", res.raw)
	}
}

// TestPatchRefusalsChangeNothing: the refusals that the review of the PATCH found wanting.
func TestPatchRefusalsChangeNothing(t *testing.T) {
	s := startServer(t, t.TempDir()+"/users.db")
	created := s.do("POST", "/scim/v2/Users", `{`+userSchema+`,"userName":"kurt","displayName":"Kurt"}`).want(t, http.StatusCreated)
	path := "/scim/v2/Users/" + str(created.body, "id")
	for _, c := range []struct {
		name, body, scimType string
		status               int
		headers              []string
	}{
		{"a member without a name", `{` + patchSchema + `,"Operations":[{"op":"add","value":{"":{"":{"":"x"}}}}]}`, "invalidPath", 400, nil},
		{"userName replaced by null", `{` + patchSchema + `,"Operations":[{"op":"replace","path":"userName","value":null}]}`, "invalidValue", 400, nil},
		{"userName replaced by nothing", `{` + patchSchema + `,"Operations":[{"op":"replace","value":{"userName":""}}]}`, "invalidValue", 400, nil},
		{"a value path on no value", `{` + patchSchema + `,"Operations":[{"op":"replace","path":"emails[not (value eq \"q\")].value","value":"a@b.c"}]}`, "noTarget", 400, nil},
		{"a stale If-Match", `{` + patchSchema + `,"Operations":[{"op":"replace","path":"displayName","value":"K"}]}`, "", 412, []string{"If-Match", `W/"7"`}},
		{"a malformed If-Match", `{` + patchSchema + `,"Operations":[{"op":"replace","path":"displayName","value":"Kurt"}]}`, "invalidValue", 400, []string{"If-Match", `garbage"1"`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s.do("PATCH", path, c.body, c.headers...).wantError(t, c.status, c.scimType)
		})
	}
	after := s.do("GET", path, "").want(t, http.StatusOK)
	if after.header.Get("ETag") != created.header.Get("ETag") {
		t.Errorf("a refused PATCH changed the user: %s", after.raw)
	}
	matched := s.do("PATCH", path, `{`+patchSchema+`,"Operations":[{"op":"replace","path":"displayName","value":"Kurt G"}]}`,
		"If-Match", created.header.Get("ETag")).want(t, http.StatusOK)
	if str(matched.body, "displayName") != "Kurt G" {
		t.Errorf("a PATCH with the current If-Match: %s", matched.raw)
	}
}

// TestAGetAnswersNotModifiedWhileTheUserIsAtItsVersion: If-None-Match with the version a client
// holds (weak, as meta.version is) is 304 until the user changes.
func TestAGetAnswersNotModifiedWhileTheUserIsAtItsVersion(t *testing.T) {
	s := startServer(t, t.TempDir()+"/users.db")
	created := s.do("POST", "/scim/v2/Users", `{`+userSchema+`,"userName":"emmy"}`).want(t, http.StatusCreated)
	path, version := "/scim/v2/Users/"+str(created.body, "id"), created.header.Get("ETag")
	if a := s.do("GET", path, "", "If-None-Match", version); a.status != http.StatusNotModified || a.header.Get("ETag") != version || len(a.raw) != 0 {
		t.Errorf("GET with the current version: %d %q %s, want 304 with the ETag", a.status, a.header.Get("ETag"), a.raw)
	}
	s.do("PATCH", path, `{`+patchSchema+`,"Operations":[{"op":"replace","path":"displayName","value":"Emmy Noether"}]}`).want(t, http.StatusOK)
	if a := s.do("GET", path, "", "If-None-Match", version); a.status != http.StatusOK || str(a.body, "displayName") != "Emmy Noether" {
		t.Errorf("GET with the version before the PATCH: %d %s, want the user", a.status, a.raw)
	}
	s.do("GET", path, "", "If-None-Match", "not a tag").wantError(t, http.StatusBadRequest, "invalidValue")
}
