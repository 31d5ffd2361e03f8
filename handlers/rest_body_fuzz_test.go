package handlers

// Fuzz targets for the JSON decoding of every REST body that is read with decodeBody: POST /users,
// PUT /users/{id} and POST /users/{id}/posts (PATCH has its own target in merge_patch_fuzz_test.go).
// Besides the fixture's invariants, a 2xx answer must hold what the body asked for, as the body reads
// with encoding/json (an independent reading), and be what the store now holds.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"

	usersv1 "usersd/gen/users/v1"
	"usersd/handlers/restbody"
	"usersd/store"
)

// FuzzCreateUserBody posts a fuzzed body to /users.
func FuzzCreateUserBody(f *testing.F) {
	fx := fzNewFixture(f, fzOptions{restore: true})
	f.Fuzz(func(t *testing.T, body []byte) {
		fx.begin(t)
		res, _ := fx.serve(t, fzRequest{method: http.MethodPost, target: "/users", header: fzWriteHeader(restbody.MediaTypeJSON), body: body})
		fx.check(t, res)
		if res.ok() {
			if res.status != http.StatusCreated {
				t.Fatalf("a create answered %d, want 201:\n%s", res.status, res)
			}
			u := fzDecodeUser(t, res)
			members := fzMembers(t, res)
			if u.GetName() != members.text(t, res, "name") || u.GetRole() != members.text(t, res, "role") {
				t.Fatalf("created %v, not what the body asked for:\n%s", u, res)
			}
			if loc := res.header.Get("Location"); loc != "/users/"+strconv.Itoa(int(u.GetId())) {
				t.Fatalf("Location %q for user %d:\n%s", loc, u.GetId(), res)
			}
			fx.checkStoredUser(t, res, u)
		}
		fx.settle(t, res, func(before, after fzSnapshot) error {
			changed := before.changed(after)
			if len(changed) != 1 {
				return fmt.Errorf("users %v changed; a create adds one user", changed)
			}
			if _, existed := before.user(changed[0]); existed {
				return fmt.Errorf("a create changed user %d, which existed", changed[0])
			}
			return nil
		})
	})
}

// FuzzReplaceUserBody puts a fuzzed body to /users/1 (no If-Match: no precondition).
func FuzzReplaceUserBody(f *testing.F) {
	fx := fzNewFixture(f, fzOptions{restore: true})
	target := "/users/" + strconv.Itoa(int(fzAda))
	f.Fuzz(func(t *testing.T, body []byte) {
		fx.begin(t)
		res, _ := fx.serve(t, fzRequest{method: http.MethodPut, target: target, header: fzWriteHeader(restbody.MediaTypeJSON), body: body})
		fx.check(t, res)
		if res.ok() {
			if res.status != http.StatusOK {
				t.Fatalf("a replace answered %d, want 200:\n%s", res.status, res)
			}
			u := fzDecodeUser(t, res)
			members := fzMembers(t, res)
			// PUT sets every writable field: a role left out is cleared.
			if u.GetId() != fzAda || u.GetName() != members.text(t, res, "name") || u.GetRole() != members.text(t, res, "role") {
				t.Fatalf("replaced with %v, not what the body asked for:\n%s", u, res)
			}
			if id, ok := members.int(t, res, "id"); ok && id != 0 && id != int64(fzAda) {
				t.Fatalf("a body id %d other than the path's %d was accepted:\n%s", id, fzAda, res)
			}
			fx.checkStoredUser(t, res, u)
		}
		fx.settle(t, res, fzOnlyChanged(fzAda))
	})
}

// FuzzCreatePostBody posts a fuzzed body to /users/1/posts.
func FuzzCreatePostBody(f *testing.F) {
	fx := fzNewFixture(f, fzOptions{restore: true})
	target := "/users/" + strconv.Itoa(int(fzAda)) + "/posts"
	f.Fuzz(func(t *testing.T, body []byte) {
		fx.begin(t)
		res, _ := fx.serve(t, fzRequest{method: http.MethodPost, target: target, header: fzWriteHeader(restbody.MediaTypeJSON), body: body})
		fx.check(t, res)
		if res.ok() {
			if res.status != http.StatusCreated {
				t.Fatalf("a create answered %d, want 201:\n%s", res.status, res)
			}
			answered := &usersv1.Post{}
			if err := protojson.Unmarshal(res.body, answered); err != nil {
				t.Fatalf("the answer is not a Post: %v\n%s", err, res)
			}
			members := fzMembers(t, res)
			if answered.GetId() <= 0 || answered.GetUserId() != fzAda ||
				answered.GetTitle() != members.text(t, res, "title") || answered.GetBody() != members.text(t, res, "body") {
				t.Fatalf("created %v, not what the body asked for:\n%s", answered, res)
			}
			for _, name := range []string{"userId", "user_id"} {
				if id, ok := members.int(t, res, name); ok && id != 0 && id != int64(fzAda) {
					t.Fatalf("a body %s %d other than the path's %d was accepted:\n%s", name, id, fzAda, res)
				}
			}
			// The store holds the seed posts and the answered one after them.
			before, after := fx.baseline.Posts[fzAda], fx.snapshot(t).Posts[fzAda]
			if len(after) != len(before)+1 || !slices.Equal(after[:len(before)], before) || !isPostMessage(after[len(before)], answered) {
				t.Fatalf("the posts of user %d went from %+v to %+v; want the answered post added:\n%s", fzAda, before, after, res)
			}
		}
		fx.settle(t, res, fzOnlyChanged(fzAda))
	})
}

// fzBodyMembers is a request body that a 2xx answer accepted, read with encoding/json: the members
// of one object. It is an independent reading of the body, to hold the answer to.
type fzBodyMembers map[string]json.RawMessage

func fzMembers(t *testing.T, res *fzResponse) fzBodyMembers {
	t.Helper()
	var m fzBodyMembers
	if err := json.Unmarshal(res.req.body, &m); err != nil || m == nil {
		t.Fatalf("a body that is not a JSON object was accepted (encoding/json: %v); malformed JSON is 400:\n%s", err, res)
	}
	return m
}

// text returns a string member; a missing or null member is "".
func (m fzBodyMembers) text(t *testing.T, res *fzResponse, name string) string {
	t.Helper()
	raw, ok := m[name]
	if !ok || string(raw) == "null" {
		return ""
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("member %q of an accepted body is not a string: %s\n%s", name, raw, res)
	}
	return s
}

// int returns an integer member, given as a number or (as protojson allows) a string of one; ok is
// false when the member is missing or null.
func (m fzBodyMembers) int(t *testing.T, res *fzResponse, name string) (int64, bool) {
	t.Helper()
	raw, ok := m[name]
	if !ok || string(raw) == "null" {
		return 0, false
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		raw = []byte(s)
	}
	var n json.Number
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&n); err != nil {
		t.Fatalf("member %q of an accepted body is not a number: %s\n%s", name, raw, res)
	}
	if i, err := n.Int64(); err == nil {
		return i, true
	}
	f, err := n.Float64() // 1e0 and 1.0 are integers to protojson
	if err != nil || f != float64(int64(f)) {
		t.Fatalf("member %q of an accepted body is not an integer: %s\n%s", name, raw, res)
	}
	return int64(f), true
}

// isPostMessage reports whether m is the wire message of the stored post p.
func isPostMessage(p store.Post, m *usersv1.Post) bool {
	return m.GetId() == p.ID && m.GetUserId() == p.UserID && m.GetTitle() == p.Title && m.GetBody() == p.Body &&
		m.GetCreatedAt().AsTime().Equal(p.CreatedAt)
}
