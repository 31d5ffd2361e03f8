package handlers

// A fuzz target for the :id parser: every route under /users/{id} with a fuzzed id segment.

import (
	"math"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"testing"

	"usersd/handlers/restbody"
)

// fzIDOps are the routes that read :id, each with a request that succeeds for an existing user.
var fzIDOps = []struct {
	method, suffix, contentType, body string
	status                            int // the answer for an existing user
}{
	{http.MethodGet, "", "", "", http.StatusOK},
	{http.MethodPut, "", restbody.MediaTypeJSON, `{"name":"Ada","role":"admin"}`, http.StatusOK},
	{http.MethodPatch, "", restbody.MediaTypeMergePatch, `{"role":"editor"}`, http.StatusOK},
	{http.MethodDelete, "", "", "", http.StatusNoContent},
	{http.MethodGet, "/posts", "", "", http.StatusOK},
	{http.MethodPost, "/posts", restbody.MediaTypeJSON, `{"title":"t"}`, http.StatusCreated},
}

var fzCanonicalID = regexp.MustCompile(`^[1-9][0-9]*$`)

// FuzzUserID sends one of fzIDOps to /users/<segment>/..., the segment path-escaped, so that the
// handler reads it back exactly; and, when it differs and a request line can carry it, raw as well.
// (url.PathEscape leaves "." alone, so "." and ".." stay dot segments.) Besides the fixture's
// invariants, for the escaped form (":id arrives as text and must parse as a positive int32"):
//   - the id of a seed user, in decimal, gets the route's success status and changes only that user;
//   - any other positive int32 in decimal is 404 and changes nothing;
//   - a decimal that is not canonical ("+1", "007") may be read as its number or refused with 400;
//   - 0, negative numbers, numbers past the int32 range and any text that is not a decimal integer
//     are 400, or 404 for a segment that leaves no id segment once the mux has cleaned the
//     (unescaped) path: "", ".", "..", "/", "a/.." and the like;
//   - a 2xx answer is only ever given for the id of a seed user.
//
// The raw form is held to the fixture's invariants only: it may name another route altogether.
func FuzzUserID(f *testing.F) {
	fx := fzNewFixture(f, fzOptions{allPosts: true})
	f.Fuzz(func(t *testing.T, op uint8, segment string) {
		fx.begin(t)
		o := fzIDOps[int(op)%len(fzIDOps)]
		send := func(path string) (*fzResponse, bool) {
			req := fzRequest{method: o.method, target: path + o.suffix}
			if o.method != http.MethodGet {
				req.header = fzWriteHeader(o.contentType)
			}
			if o.body != "" {
				req.body = []byte(o.body)
			}
			return fx.serve(t, req)
		}
		// What ids the answer may touch: the user that the segment names, if it names one.
		existing := func(id int64) bool { _, ok := fx.baseline.user(int32(id)); return ok }
		var id int64 = -1
		if n, err := strconv.ParseInt(segment, 10, 64); err == nil {
			id = n
		}

		res, _ := send("/users/" + url.PathEscape(segment))
		fx.check(t, res)
		named := fzCanonicalID.MatchString(segment) && id > 0 && id <= math.MaxInt32
		numeric := fzInteger.MatchString(segment) && id >= 0 // "+1" or "007" may or may not be id 1
		switch {
		case named && existing(id):
			if res.status != o.status {
				t.Fatalf("user %d exists: want %d:\n%s", id, o.status, res)
			}
		case named:
			if res.status != http.StatusNotFound {
				t.Fatalf("user %d does not exist: want 404:\n%s", id, res)
			}
		case numeric && id > 0 && id <= math.MaxInt32:
			if res.status != http.StatusBadRequest && res.status != http.StatusNotFound && res.status != o.status {
				t.Fatalf("segment %q: want 400, 404, or what id %d gets:\n%s", segment, id, res)
			}
		case segment == "" || fzCleanPath("/users/"+segment) != "/users/"+segment:
			// http.ServeMux cleans the unescaped path before it routes: "", ".", "..", "/", "a/.."
			// and the like leave no id segment to route by.
			if res.status != http.StatusNotFound && res.status != http.StatusBadRequest && !(fzTolerateCleanPathRedirects && fzIsCleanPathRedirect(res)) {
				t.Fatalf("segment %q leaves no id segment once the path is cleaned: want 404 or 400:\n%s", segment, res)
			}
		default:
			if res.status != http.StatusBadRequest {
				t.Fatalf("segment %q is not a positive int32: want 400:\n%s", segment, res)
			}
		}
		if res.ok() && !(id > 0 && id <= math.MaxInt32 && existing(id)) {
			t.Fatalf("segment %q names no seed user, yet answered %d:\n%s", segment, res.status, res)
		}
		if o.method == http.MethodDelete && res.status == http.StatusNoContent {
			get, _ := fx.serve(t, fzRequest{method: http.MethodGet, target: "/users/" + strconv.FormatInt(id, 10)})
			fx.check(t, get)
			if get.status != http.StatusNotFound {
				t.Fatalf("user %d was deleted, yet GET answers %d:\n%s", id, get.status, res)
			}
		}
		fx.settle(t, res, fzOnlyChanged(int32(id)))

		if raw := "/users/" + segment; raw != "/users/"+url.PathEscape(segment) {
			if res, ok := send(raw); ok {
				fx.check(t, res)
				fx.settle(t, res, func(before, after fzSnapshot) error { return nil })
			}
		}
	})
}
