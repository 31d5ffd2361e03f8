package handlers

// A fuzz target for the request headers that make writes safe to retry and to race
// (docs/API.md#safe-retries-and-concurrent-edits): If-Match on PUT, PATCH and DELETE, If-None-Match on GET,
// Idempotency-Key on the creates.

import (
	"bytes"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"usersd/handlers/restbody"
	"usersd/users"
)

// fzCondOps are the requests of FuzzConditionalHeaders. Each header goes only where the contract
// gives it a meaning: If-None-Match on the GET, If-Match on the other writes, Idempotency-Key on
// the creates.
var fzCondOps = []struct {
	method, target, contentType, body string
	status                            int // the answer when every header is absent
	// retry is the create that must succeed with the same Idempotency-Key after this one failed.
	retryTarget, retryBody string
}{
	{method: http.MethodGet, target: "/users/1", status: http.StatusOK},
	{method: http.MethodPut, target: "/users/1", contentType: restbody.MediaTypeJSON, body: `{"name":"Ada","role":"admin"}`, status: http.StatusOK},
	{method: http.MethodPatch, target: "/users/1", contentType: restbody.MediaTypeMergePatch, body: `{"role":"editor"}`, status: http.StatusOK},
	{method: http.MethodDelete, target: "/users/1", status: http.StatusNoContent},
	{method: http.MethodPost, target: "/users", contentType: restbody.MediaTypeJSON, body: `{"name":"Dan"}`, status: http.StatusCreated},
	{method: http.MethodPost, target: "/users/1/posts", contentType: restbody.MediaTypeJSON, body: `{"title":"t"}`, status: http.StatusCreated},
	// Creates that fail (a missing name, a missing user): their key must be free again.
	{method: http.MethodPost, target: "/users", contentType: restbody.MediaTypeJSON, body: `{"name":""}`, status: http.StatusBadRequest,
		retryTarget: "/users", retryBody: `{"name":"Dan"}`},
	{method: http.MethodPost, target: "/users/999/posts", contentType: restbody.MediaTypeJSON, body: `{"title":"t"}`, status: http.StatusNotFound,
		retryTarget: "/users/1/posts", retryBody: `{"title":"t"}`},
}

// FuzzConditionalHeaders sends one of fzCondOps with fuzzed header values; a value holds one header
// line per line of text ("" sends no header), each trimmed as the server reads it. Besides the
// fixture's invariants, the answer must be what RFC 9110 and the contract make of the headers:
//   - If-Match (its lines one list): no header or "*" lets the write through; a list of entity tags
//     lets it through exactly when it holds the strong tag "1" (user 1's etag), and is 412
//     otherwise; anything else is 400 (and so may be a list of more than 32 tags);
//   - If-None-Match: 304 (with the ETag, no body) only when a tag matches "1" weakly or the value is
//     "*"; a single valid line that matches must get 304, one that does not must get 200;
//   - Idempotency-Key: one line, a bare key or an RFC 8941 string, of 1 to 255 printable ASCII
//     characters, else 400. A create that succeeded with a key answers its repeat with the same
//     status and body and Idempotent-Replayed: true, creating nothing; the key with another body is
//     422. A create that failed leaves its key free: the key then works for another create.
func FuzzConditionalHeaders(f *testing.F) {
	fx := fzNewFixture(f, fzOptions{})
	f.Fuzz(func(t *testing.T, op uint8, ifMatch, ifNoneMatch, idempotencyKey string) {
		fx.begin(t)
		o := fzCondOps[int(op)%len(fzCondOps)]
		header := http.Header{}
		if o.method != http.MethodGet {
			header = fzWriteHeader(o.contentType)
		}
		for name, value := range map[string]string{"If-Match": ifMatch, "If-None-Match": ifNoneMatch, "Idempotency-Key": idempotencyKey} {
			lines, ok := fzHeaderLines(value)
			if !ok {
				return // no client can send it
			}
			used := name == "If-None-Match" && o.method == http.MethodGet ||
				name == "If-Match" && (o.method == http.MethodPut || o.method == http.MethodPatch || o.method == http.MethodDelete) ||
				name == "Idempotency-Key" && o.method == http.MethodPost
			if used && lines != nil {
				header[name] = lines
			}
		}
		req := fzRequest{method: o.method, target: o.target, header: header, allow304: o.method == http.MethodGet}
		if o.body != "" {
			req.body = []byte(o.body)
		}
		res, _ := fx.serve(t, req)
		fx.check(t, res)

		switch o.method {
		case http.MethodGet:
			fzCheckIfNoneMatch(t, res, header.Values("If-None-Match"))
			fx.settle(t, res, nil)
		case http.MethodPost:
			fx.checkIdempotency(t, res, o.status, o.retryTarget, o.retryBody)
		default:
			fzCheckIfMatch(t, res, o.status, header.Values("If-Match"))
			fx.settle(t, res, fzOnlyChanged(fzAda))
		}
	})
}

// fzHeaderLines splits a fuzzed value into header lines, each trimmed of spaces and tabs as the
// server reads a line. ok is false if a line holds a character that no client can send.
func fzHeaderLines(value string) (lines []string, ok bool) {
	if value == "" {
		return nil, true
	}
	for line := range strings.SplitSeq(value, "\n") {
		line = strings.Trim(line, " \t")
		if !fzValidHeaderValue(line) {
			return nil, false
		}
		lines = append(lines, line)
	}
	return lines, true
}

// fzEntityTag and fzEntityTagList follow RFC 9110 section 8.8.3 and the list rule of section 5.6.1
// (empty elements allowed); etagc is any byte but controls, space, DQUOTE and DEL.
var (
	fzEntityTag     = regexp.MustCompile(`(W/)?"([^\x00-\x20"\x7f]*)"`)
	fzEntityTagList = regexp.MustCompile(`^[ \t,]*(?:W/)?"[^\x00-\x20"\x7f]*"(?:[ \t]*,[ \t,]*(?:W/)?"[^\x00-\x20"\x7f]*")*[ \t,]*$`)
)

// fzMatches reads one If-Match or If-None-Match value: whether it is "*" or a valid list, the
// number of tags, whether one of them is "1" strongly and whether one is "1" weakly or strongly.
func fzMatches(value string) (wildcard, valid bool, tags int, strong1, weak1 bool) {
	if strings.TrimSpace(value) == "*" {
		return true, true, 0, false, false
	}
	if !fzEntityTagList.MatchString(value) {
		return false, false, 0, false, false
	}
	for _, m := range fzEntityTag.FindAllStringSubmatch(value, -1) {
		tags++
		if `"`+m[2]+`"` == fzAdaETag {
			weak1 = true
			strong1 = strong1 || m[1] == ""
		}
	}
	return false, true, tags, strong1, weak1
}

// fzCheckIfMatch checks the answer of a write with If-Match lines (none: no precondition).
func fzCheckIfMatch(t *testing.T, res *fzResponse, success int, lines []string) {
	t.Helper()
	value := strings.Join(lines, ", ") // RFC 9110 section 5.3: the lines are one list
	wildcard, valid, tags, strong1, _ := fzMatches(value)
	var want []int
	switch {
	case len(lines) == 0 || wildcard:
		want = []int{success}
	case strings.Trim(value, " \t,") == "": // only empty elements: no tag, or no header
		want = []int{success, http.StatusPreconditionFailed, http.StatusBadRequest}
	case !valid:
		want = []int{http.StatusBadRequest}
	case strong1:
		want = []int{success}
	default:
		want = []int{http.StatusPreconditionFailed}
	}
	if tags > users.MaxEntityTags {
		want = append(want, http.StatusBadRequest)
	}
	if !slices.Contains(want, res.status) {
		t.Fatalf("If-Match %q: answered %d, want one of %v:\n%s", value, res.status, want, res)
	}
}

// fzCheckIfNoneMatch checks the answer of GET /users/1 with If-None-Match lines.
func fzCheckIfNoneMatch(t *testing.T, res *fzResponse, lines []string) {
	t.Helper()
	anyMatch := false
	for _, line := range lines {
		wildcard, _, _, _, weak1 := fzMatches(line)
		anyMatch = anyMatch || wildcard || weak1
	}
	if res.status == http.StatusNotModified {
		if !anyMatch {
			t.Fatalf("304 for If-None-Match %q, which does not match %s:\n%s", lines, fzAdaETag, res)
		}
		if res.header.Get("ETag") != fzAdaETag {
			t.Fatalf("304 without ETag %s:\n%s", fzAdaETag, res)
		}
		return
	}
	if len(lines) == 1 {
		wildcard, valid, _, _, weak1 := fzMatches(lines[0])
		switch {
		case (wildcard || weak1) && res.status != http.StatusNotModified:
			t.Fatalf("If-None-Match %q matches %s: want 304:\n%s", lines[0], fzAdaETag, res)
		case valid && !wildcard && !weak1 && res.status != http.StatusOK:
			t.Fatalf("If-None-Match %q does not match %s: want 200:\n%s", lines[0], fzAdaETag, res)
		}
	}
	if res.status != http.StatusOK && res.status != http.StatusBadRequest {
		t.Fatalf("GET of an existing user answered %d:\n%s", res.status, res)
	}
}

var fzStructuredString = regexp.MustCompile(`^"(?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\["\\])*"$`)

// fzKeyValid reads Idempotency-Key lines as the contract does: whether they make one valid key.
func fzKeyValid(lines []string) bool {
	if len(lines) != 1 {
		return len(lines) == 0
	}
	key := lines[0]
	if strings.HasPrefix(key, `"`) {
		if !fzStructuredString.MatchString(key) {
			return false
		}
		key = strings.NewReplacer(`\"`, `"`, `\\`, `\`).Replace(key[1 : len(key)-1])
	}
	if key == "" || len(key) > users.MaxRequestIDLength {
		return false
	}
	for i := range len(key) {
		if key[i] < 0x20 || key[i] > 0x7e {
			return false
		}
	}
	return true
}

// checkIdempotency checks a create and, with a key, its repeats or its retry.
func (fx *fzFixture) checkIdempotency(t *testing.T, res *fzResponse, status int, retryTarget, retryBody string) {
	t.Helper()
	keys := res.req.header.Values(idempotencyKeyHeader)
	valid := fzKeyValid(keys)
	want := http.StatusBadRequest
	if valid {
		want = status
	}
	if res.status != want {
		t.Fatalf("Idempotency-Key %q (valid: %v): answered %d, want %d:\n%s", keys, valid, res.status, want, res)
	}
	created := func(before, after fzSnapshot) error {
		changed := before.changed(after)
		if len(changed) == 1 {
			return nil
		}
		return fzOnlyChanged()(before, after) // says what changed
	}
	if !res.ok() || len(keys) == 0 {
		if !res.ok() && valid && len(keys) == 1 && retryTarget != "" {
			fx.settle(t, res, nil)
			// The failed create kept nothing: its key works for another create.
			retry := res.req
			retry.target, retry.body = retryTarget, []byte(retryBody)
			again, _ := fx.serve(t, retry)
			fx.check(t, again)
			if again.status != http.StatusCreated || again.header.Get(users.ReplayedHeader) != "" {
				t.Fatalf("a create with the key of a create that failed answered %d (the key was kept?):\n%s\nafter:\n%s", again.status, again, res)
			}
			res = again
		}
		fx.settle(t, res, created)
		return
	}

	// A create that succeeded with a key: its repeat is answered from the kept answer.
	first := fx.snapshot(t)
	repeat, _ := fx.serve(t, res.req)
	fx.check(t, repeat)
	if repeat.status != res.status || !bytes.Equal(repeat.body, res.body) || repeat.header.Get(users.ReplayedHeader) != "true" {
		t.Fatalf("the repeat of a create is not its first answer, replayed:\n%s\nfirst:\n%s", repeat, res)
	}
	if after := fx.snapshot(t); len(first.changed(after)) > 0 {
		t.Fatalf("the repeat of a create changed users %v:\n%s", first.changed(after), repeat)
	}
	other := res.req
	other.body = append(bytes.TrimSuffix(slices.Clone(other.body), []byte("}")), []byte(`,"`+fzOtherMember(other.target)+`":"other"}`)...)
	mismatch, _ := fx.serve(t, other)
	fx.check(t, mismatch)
	if mismatch.status != 422 {
		t.Fatalf("the key of a create with another body: answered %d, want 422:\n%s", mismatch.status, mismatch)
	}
	if after := fx.snapshot(t); len(first.changed(after)) > 0 {
		t.Fatalf("a create refused with 422 changed users %v:\n%s", first.changed(after), mismatch)
	}
	fx.settle(t, res, created)
}

// fzOtherMember is a writable member of the resource that target creates, to make another body.
func fzOtherMember(target string) string {
	if strings.HasSuffix(target, "/posts") {
		return "body"
	}
	return "role"
}
