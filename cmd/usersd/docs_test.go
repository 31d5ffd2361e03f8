package main

import (
	"bytes"
	"compress/gzip"
	"io"
	"io/fs"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"usersd/internal/apitest"
	"usersd/web"
)

// The API reference at /docs: Swagger UI, embedded from web/public/docs, rendering /openapi.json
// (but the seed's example routes) under the page's Content-Security-Policy.

func TestTheAPIReferenceRendersEveryOperation(t *testing.T) {
	s := startServer(t)
	ctx := newBrowser(t)
	// Recorded by a script the browser runs before each document's own (so the policy that it
	// checks does not apply to it): every violation of the Content-Security-Policy.
	const recordViolations = `window.cspViolations = [];
document.addEventListener("securitypolicyviolation", e => window.cspViolations.push(e.violatedDirective + " " + e.blockedURI));`
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument,
		page.AddScriptToEvaluateOnNewDocumentParams{Source: recordViolations}); err != nil {
		t.Fatal(err)
	}
	p := browserPage{t: t, ctx: ctx}
	p.do("open /docs", chromedp.Navigate(s.BaseURL+"/docs"), // redirected to /docs/
		chromedp.WaitVisible(chromedp.CSS(".opblock")))
	operations := eval[int](p, `document.querySelectorAll(".opblock").length`)
	paths := eval[string](p, `[...document.querySelectorAll(".opblock-summary-path")].map(e => e.textContent).join(" ")`)
	violations := eval[[]string](p, `window.cspViolations`)
	if want := apitest.Operations("examples"); operations != want {
		t.Errorf("/docs shows %d operations, want the document's %d but its examples", operations, want)
	}
	for _, path := range []string{"/users", "/users/{id}", "/users/{id}/posts", "/openapi.json", "/readyz"} {
		if !strings.Contains(paths, path) {
			t.Errorf("/docs does not show %s; it shows: %s", path, paths)
		}
	}
	for _, path := range []string{"/boom", "/echo", "/info", "/private"} {
		if strings.Contains(paths, path) {
			t.Errorf("/docs shows the example route %s beside the users API", path)
		}
	}
	if len(violations) > 0 {
		t.Errorf("the page's Content-Security-Policy refused: %v", violations)
	}
}

func TestTheAPIReferenceIsServedCompressedOrNot(t *testing.T) {
	s := startServer(t)
	want, err := fs.ReadFile(web.Public, "docs/swagger-ui-bundle.js.gz")
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(want))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	// A transport that leaves Accept-Encoding and the body alone, to see what the server sends.
	raw := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	for _, tc := range []struct {
		acceptEncoding, wantEncoding string
		want                         []byte
	}{
		{"gzip, deflate, br", "gzip", want},
		{"", "", plain},
		{"gzip;q=0, identity", "", plain},
		{"*", "gzip", want},
	} {
		req, _ := http.NewRequest("GET", s.BaseURL+"/docs/swagger-ui-bundle.js", nil)
		req.Header.Set("Accept-Encoding", tc.acceptEncoding)
		res, err := raw.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || res.Header.Get("Content-Encoding") != tc.wantEncoding || !bytes.Equal(body, tc.want) {
			t.Errorf("Accept-Encoding %q: %d, Content-Encoding %q, %d bytes; want 200, %q, %d bytes",
				tc.acceptEncoding, res.StatusCode, res.Header.Get("Content-Encoding"), len(body), tc.wantEncoding, len(tc.want))
		}
		if !strings.HasPrefix(res.Header.Get("Content-Type"), "text/javascript") || res.Header.Get("Vary") != "Accept-Encoding" || res.Header.Get("ETag") == "" {
			t.Errorf("Accept-Encoding %q: Content-Type %q, Vary %q, ETag %q", tc.acceptEncoding,
				res.Header.Get("Content-Type"), res.Header.Get("Vary"), res.Header.Get("ETag"))
		}
	}
	page := s.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: "/"})
	if !bytes.Contains(page.Body, []byte(`href="/docs/"`)) {
		t.Error("the browser page does not link to /docs/")
	}
}
