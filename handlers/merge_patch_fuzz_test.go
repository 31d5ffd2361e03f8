package handlers

// A fuzz target for merge-patch application: PATCH /users/{id} with a fuzzed body and Content-Type.

import (
	"mime"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"usersd/handlers/restbody"
)

// FuzzPatchUser patches user 1 (name "Ada", role "admin") with a fuzzed body under a fuzzed
// Content-Type (an empty one sends none). Besides the fixture's invariants:
//   - the media type decides alone between 415 and reading the body: application/merge-patch+json or
//     application/json (any case, any parameters; another charset than UTF-8, an empty one included, may be refused);
//   - a 200 holds the merge of the patch into the user, as encoding/json reads the patch: a string
//     member sets its field, a null role clears the role, and a null name is never accepted;
//   - a patch that names neither name nor role writes nothing.
func FuzzPatchUser(f *testing.F) {
	fx := fzNewFixture(f, fzOptions{restore: true})
	target := "/users/" + strconv.Itoa(int(fzAda))
	f.Fuzz(func(t *testing.T, contentType string, body []byte) {
		fx.begin(t)
		contentType = strings.Trim(contentType, " \t") // as the server reads a header line
		if !fzValidHeaderValue(contentType) {
			return // no client can send it
		}
		res, _ := fx.serve(t, fzRequest{method: http.MethodPatch, target: target, header: fzWriteHeader(contentType), body: body})
		fx.check(t, res)

		mediaType, params, err := mime.ParseMediaType(contentType)
		accepted := err == nil && (mediaType == restbody.MediaTypeMergePatch || mediaType == restbody.MediaTypeJSON)
		charset, namesCharset := params["charset"]
		otherCharset := accepted && namesCharset && !strings.EqualFold(charset, "utf-8") // an empty one too
		switch {
		case !accepted && res.status != http.StatusUnsupportedMediaType:
			t.Fatalf("Content-Type %q answered %d, want 415:\n%s", contentType, res.status, res)
		case accepted && !otherCharset && res.status == http.StatusUnsupportedMediaType:
			t.Fatalf("Content-Type %q is one that PATCH takes, yet answered 415:\n%s", contentType, res)
		}

		before, _ := fx.baseline.user(fzAda)
		namesAField := false
		if res.ok() {
			if res.status != http.StatusOK {
				t.Fatalf("a patch answered %d, want 200:\n%s", res.status, res)
			}
			u := fzDecodeUser(t, res)
			members := fzMembers(t, res)
			wantName, wantRole := before.Name, before.Role
			if raw, ok := members["name"]; ok {
				if string(raw) == "null" {
					t.Fatalf("a patch that removes the name was accepted:\n%s", res)
				}
				wantName, namesAField = members.text(t, res, "name"), true
			}
			if _, ok := members["role"]; ok {
				wantRole, namesAField = members.text(t, res, "role"), true
			}
			for member, raw := range members {
				// The identity fields change the user too; labels only by the keys they name.
				if fzIdentityMembers[member] && string(raw) != "{}" {
					namesAField = true
				}
			}
			if id, ok := members.int(t, res, "id"); ok && id != 0 && id != int64(fzAda) {
				t.Fatalf("a body id %d other than the path's %d was accepted:\n%s", id, fzAda, res)
			}
			if u.GetId() != fzAda || u.GetName() != wantName || u.GetRole() != wantRole {
				t.Fatalf("patched into %v, want name %q and role %q:\n%s", u, wantName, wantRole, res)
			}
			fx.checkStoredUser(t, res, u)
		}
		if namesAField {
			fx.settle(t, res, fzOnlyChanged(fzAda))
		} else {
			fx.settle(t, res, nil) // nothing to change: no write, and the etag stays
		}
	})
}

// fzValidHeaderValue reports whether a client can send v as one header line: no control characters
// but tab (RFC 9110 section 5.5), which the net/http server refuses.
func fzValidHeaderValue(v string) bool {
	for i := range len(v) {
		if c := v[i]; c < 0x20 && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// fzIdentityMembers are the members of a patch, by JSON and proto name, that set an identity field.
var fzIdentityMembers = map[string]bool{
	"userName": true, "user_name": true, "givenName": true, "given_name": true, "familyName": true, "family_name": true,
	"email": true, "externalId": true, "external_id": true, "active": true, "labels": true,
}
