package handlers

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"

	"usersd/internal/apitest"
)

// etagOf returns the ETag header of a user answer, failing the test unless it equals the body's etag.
func etagOf(t *testing.T, res response) string {
	t.Helper()
	tag := res.Header.Get("ETag")
	if body := apitest.DecodeObject(t, res.Body); tag == "" || body["etag"] != tag {
		t.Fatalf("ETag header %q, body etag %v: want the same non-empty tag", tag, body["etag"])
	}
	return tag
}

// etagVersion reads the version number out of one of the service's etags.
func etagVersion(t *testing.T, tag any) int {
	t.Helper()
	text, _ := tag.(string)
	unquoted, err := strconv.Unquote(text)
	n, err2 := strconv.Atoi(unquoted)
	if err != nil || err2 != nil {
		t.Fatalf("etag %v is not a quoted version number", tag)
	}
	return n
}

// TestRESTConditionalReads checks If-None-Match on GET /users/:id: 304 with the tag and no body when
// the client's copy is current, the full answer otherwise.
func TestRESTConditionalReads(t *testing.T) {
	for _, tr := range apitest.Transports {
		t.Run(tr.Name, func(t *testing.T) {
			s := startServer(t)
			path := fmt.Sprintf("/users/%d", apitest.IDOf(t, s.CreateUser(t, "cached", "")))
			current := etagOf(t, s.Do(t, tr.Client, request{Method: "GET", Path: path}))

			for _, value := range []string{current, "W/" + current, "*", `"99", ` + current, `"99",,` + current} {
				res := s.Do(t, tr.Client, request{Method: "GET", Path: path, Header: map[string]string{"If-None-Match": value}})
				if res.Status != http.StatusNotModified || len(res.Body) != 0 || res.Header.Get("ETag") != current {
					t.Errorf("If-None-Match %s: %d, ETag %q, body %q; want 304, ETag %s, no body", value, res.Status, res.Header.Get("ETag"), res.Body, current)
				}
			}
			for _, value := range []string{`"99"`, `W/"2"`, `"01"`, `1`, `"unterminated`} {
				res := s.Do(t, tr.Client, request{Method: "GET", Path: path, Header: map[string]string{"If-None-Match": value}})
				if res.Status != http.StatusOK || etagOf(t, res) != current {
					t.Errorf("If-None-Match %s: %d %s; want 200 with the user", value, res.Status, res.Body)
				}
			}
			missing := s.Do(t, tr.Client, request{Method: "GET", Path: "/users/999999", Header: map[string]string{"If-None-Match": "*"}})
			if missing.Status != http.StatusNotFound {
				t.Errorf("If-None-Match * on a missing user: %d, want 404", missing.Status)
			}
		})
	}
}

// TestRESTConditionalWrites checks If-Match on PUT, PATCH and DELETE: a stale tag, or an If-Match
// sent empty, is 412 and changes nothing; the current tag, "*" or a list that holds it lets the
// write through.
func TestRESTConditionalWrites(t *testing.T) {
	writes := []struct {
		method string
		header map[string]string
		body   string
		status int
	}{
		{"PUT", map[string]string{"Content-Type": "application/json"}, `{"name":"replaced","role":"r"}`, 200},
		{"PATCH", map[string]string{"Content-Type": "application/merge-patch+json"}, `{"role":"patched"}`, 200},
		{"DELETE", nil, "", 204},
	}
	for _, tr := range apitest.Transports {
		for _, write := range writes {
			t.Run(tr.Name+"/"+write.method, func(t *testing.T) {
				s := startServer(t)
				id := apitest.IDOf(t, s.CreateUser(t, "original", ""))
				path := fmt.Sprintf("/users/%d", id)
				send := func(ifMatch string) response {
					header := map[string]string{"If-Match": ifMatch}
					for k, v := range write.header {
						header[k] = v
					}
					return s.Do(t, tr.Client, request{Method: write.method, Path: path, Header: header, Body: write.body, Key: true})
				}
				// Move the user to version 2, so that "1" is stale.
				patch := s.Do(t, tr.Client, request{Method: "PATCH", Path: path, Header: map[string]string{"Content-Type": "application/json"}, Body: `{"name":"renamed"}`, Key: true})
				current := etagOf(t, patch)
				before := apitest.Snapshot(t, s.BaseURL, id)

				refused := []struct {
					ifMatch string
					status  int
				}{
					{`"1"`, 412},              // stale
					{`W/` + current, 412},     // weak tags never match If-Match's strong comparison
					{`"1", "7"`, 412},         // a list without the current tag
					{`"0` + current[1:], 412}, // the same number, spelled otherwise, is another tag
					{`1`, 400},                // not an entity tag
					{`"2`, 400},               // unterminated
					{`*, "2"`, 400},           // "*" stands alone
					{``, 412},                 // sent empty: a list of no tags, which no etag matches
					{` , `, 412},              // only empty elements: the same
				}
				for _, c := range refused {
					res := send(c.ifMatch)
					if res.Status != c.status {
						t.Errorf("If-Match %s: %d %s, want %d", c.ifMatch, res.Status, res.Body, c.status)
						continue
					}
					res.ErrorMessage(t)
				}
				if after := apitest.Snapshot(t, s.BaseURL, id); after != before {
					t.Fatalf("refused writes changed the store:\nbefore %s\nafter  %s", before, after)
				}

				missing := s.Do(t, tr.Client, request{Method: write.method, Path: "/users/999999", Header: map[string]string{"If-Match": "*", "Content-Type": "application/json"}, Body: write.body, Key: true})
				if missing.Status != http.StatusNotFound {
					t.Errorf("If-Match * on a missing user: %d %s, want 404", missing.Status, missing.Body)
				}

				res := send(`"7", ` + current)
				if res.Status != write.status {
					t.Fatalf("If-Match with the current tag in a list: %d %s, want %d", res.Status, res.Body, write.status)
				}
				if write.method != "DELETE" {
					if next := etagOf(t, res); next == current {
						t.Fatalf("a write kept the etag %s", current)
					}
					if res := send("*"); res.Status != write.status {
						t.Fatalf("If-Match *: %d %s, want %d", res.Status, res.Body, write.status)
					}
				} else if res := s.Do(t, tr.Client, request{Method: "GET", Path: path}); res.Status != http.StatusNotFound {
					t.Fatalf("after a conditional delete the user reads %d", res.Status)
				}
			})
		}
	}
}

// TestRESTEmptyPatchStillChecksIfMatch: a PATCH that changes nothing writes nothing, but a stale
// If-Match must still refuse it rather than pretend it applied.
func TestRESTEmptyPatchStillChecksIfMatch(t *testing.T) {
	s := startServer(t)
	created := s.CreateUser(t, "unchanged", "")
	path := fmt.Sprintf("/users/%d", apitest.IDOf(t, created))
	header := map[string]string{"Content-Type": "application/merge-patch+json", "If-Match": `"9"`}
	if res := s.Do(t, apitest.HTTP1Client, request{Method: "PATCH", Path: path, Header: header, Body: `{}`, Key: true}); res.Status != 412 {
		t.Fatalf("empty PATCH with a stale If-Match: %d %s, want 412", res.Status, res.Body)
	}
	header["If-Match"] = fmt.Sprint(created["etag"])
	res := s.Do(t, apitest.HTTP1Client, request{Method: "PATCH", Path: path, Header: header, Body: `{}`, Key: true})
	if res.Status != 200 || etagOf(t, res) != created["etag"] {
		t.Fatalf("empty PATCH with the current If-Match: %d %s, want 200 and the etag unchanged", res.Status, res.Body)
	}
}

// TestRESTLostUpdatesAreRefused is the lost-update race: 50 clients read the user, then PATCH it
// with the etag they read. Of the PATCHes sent with one etag exactly one may win; the others must
// get 412, and the user must end as the last successful write left it.
func TestRESTLostUpdatesAreRefused(t *testing.T) {
	s := startServer(t)
	path := fmt.Sprintf("/users/%d", apitest.IDOf(t, s.CreateUser(t, "contended", "")))
	const clients = 50
	type outcome struct {
		readTag string
		status  int
		result  map[string]any
	}
	outcomes := make([]outcome, clients)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() {
			client := apitest.Transports[i%len(apitest.Transports)].Client
			read := s.Do(t, client, request{Method: "GET", Path: path})
			tag := read.Header.Get("ETag")
			res := s.Do(t, client, request{Method: "PATCH", Path: path, Key: true, Body: fmt.Sprintf(`{"name":"writer %d"}`, i),
				Header: map[string]string{"Content-Type": "application/merge-patch+json", "If-Match": tag}})
			outcomes[i] = outcome{readTag: tag, status: res.Status}
			if res.Status == http.StatusOK {
				outcomes[i].result = apitest.DecodeObject(t, res.Body)
			}
		})
	}
	wg.Wait()

	winners := map[string]int{} // etag read -> the writer that won with it
	var last map[string]any
	for i, o := range outcomes {
		switch o.status {
		case http.StatusOK:
			if other, ok := winners[o.readTag]; ok {
				t.Errorf("writers %d and %d both won with etag %s: one update was lost", other, i, o.readTag)
			}
			winners[o.readTag] = i
			if last == nil || etagVersion(t, o.result["etag"]) > etagVersion(t, last["etag"]) {
				last = o.result
			}
		case http.StatusPreconditionFailed:
		default:
			t.Errorf("writer %d: status %d, want 200 or 412", i, o.status)
		}
	}
	if len(winners) == 0 {
		t.Fatal("no writer won")
	}
	final := apitest.DecodeObject(t, s.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: path}).Body)
	if got := etagVersion(t, final["etag"]); got != 1+len(winners) {
		t.Errorf("version %d after %d successful writes, want %d: a write happened that no client saw succeed", got, len(winners), 1+len(winners))
	}
	if final["name"] != last["name"] || final["etag"] != last["etag"] {
		t.Errorf("final user %v, want the last successful write %v", final, last)
	}
	t.Logf("%d of %d writers won, one per etag generation; the others got 412", len(winners), clients)
}

// TestRESTWritesHonourIfNoneMatch checks If-None-Match on PUT, PATCH and DELETE (RFC 9110 section
// 13.1.2): "*" or the current tag (weak or strong) is 412 and changes nothing, since the user exists
// as the client said it must not; another tag lets the write through; If-Match is evaluated first.
func TestRESTWritesHonourIfNoneMatch(t *testing.T) {
	writes := []struct {
		method, contentType, body string
		status                    int
	}{
		{"PUT", "application/json", `{"name":"replaced","role":"r"}`, 200},
		{"PATCH", "application/merge-patch+json", `{"role":"patched"}`, 200},
		{"DELETE", "", "", 204},
	}
	for _, tr := range apitest.Transports {
		for _, write := range writes {
			t.Run(tr.Name+"/"+write.method, func(t *testing.T) {
				s := startServer(t)
				created := s.CreateUser(t, "original", "")
				id, current := apitest.IDOf(t, created), fmt.Sprint(created["etag"])
				path := fmt.Sprintf("/users/%d", id)
				send := func(path string, conditions map[string]string) response {
					header := map[string]string{}
					if write.contentType != "" {
						header["Content-Type"] = write.contentType
					}
					for k, v := range conditions {
						header[k] = v
					}
					return s.Do(t, tr.Client, request{Method: write.method, Path: path, Header: header, Body: write.body, Key: true})
				}
				before := apitest.Snapshot(t, s.BaseURL, id)
				for _, c := range []struct {
					conditions map[string]string
					status     int
				}{
					{map[string]string{"If-None-Match": "*"}, 412},
					{map[string]string{"If-None-Match": current}, 412},
					{map[string]string{"If-None-Match": `"9", W/` + current}, 412}, // weak comparison
					{map[string]string{"If-Match": current, "If-None-Match": current}, 412},
					{map[string]string{"If-Match": `"9"`, "If-None-Match": `"8"`}, 412}, // If-Match first
					{map[string]string{"If-None-Match": `1`}, 400},
				} {
					res := send(path, c.conditions)
					if res.Status != c.status {
						t.Errorf("%v: %d %s, want %d", c.conditions, res.Status, res.Body, c.status)
						continue
					}
					res.ErrorMessage(t)
				}
				if after := apitest.Snapshot(t, s.BaseURL, id); after != before {
					t.Fatalf("refused writes changed the store:\nbefore %s\nafter  %s", before, after)
				}
				if res := send("/users/999999", map[string]string{"If-None-Match": "*"}); res.Status != http.StatusNotFound {
					t.Errorf("If-None-Match * on a missing user: %d %s, want 404", res.Status, res.Body)
				}
				if res := send(path, map[string]string{"If-Match": current, "If-None-Match": `"9"`}); res.Status != write.status {
					t.Fatalf("If-None-Match with another tag: %d %s, want %d", res.Status, res.Body, write.status)
				}
			})
		}
	}
}
