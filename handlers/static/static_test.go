package static

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"testing/fstest"
)

func gzipped(t *testing.T, text string) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write([]byte(text))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestRoutesAreTheFiles: one route for each file, the folder of an index.html, the plain name of a
// gzipped file, nothing for dot files, and a refusal of a name that a pattern would misread.
func TestRoutesAreTheFiles(t *testing.T) {
	folder := fstest.MapFS{
		"index.html":        {Data: []byte("<p>page")},
		"app.js":            {Data: []byte("js")},
		"docs/index.html":   {Data: []byte("docs")},
		"docs/bundle.js.gz": {Data: gzipped(t, "bundle")},
		".hidden":           {Data: []byte("x")},
		".git/config":       {Data: []byte("x")},
	}
	routes, err := Routes(folder)
	if err != nil {
		t.Fatal(err)
	}
	var patterns []string
	for _, r := range routes {
		patterns = append(patterns, r.Pattern)
	}
	slices.Sort(patterns)
	want := []string{"GET /app.js", "GET /docs", "GET /docs/bundle.js", "GET /docs/index.html", "GET /docs/{$}", "GET /index.html", "GET /{$}"}
	if !slices.Equal(patterns, want) {
		t.Errorf("routes %q, want %q", patterns, want)
	}
	if _, err := Routes(fstest.MapFS{"a b.js": {Data: []byte("x")}}); err == nil {
		t.Error("a file name with a space was served")
	}
}

// TestPrecompressedFiles: a gzipped file goes as it is to a client that takes gzip, inflated to one
// that does not, each with a tag of its own, and a current tag is a 304.
func TestPrecompressedFiles(t *testing.T) {
	h := servePrecompressed("bundle.js", gzipped(t, "the bundle"))
	get := func(header http.Header) *http.Response {
		r := httptest.NewRequest("GET", "/bundle.js", nil)
		r.Header = header
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Result()
	}
	zipped := get(http.Header{"Accept-Encoding": {"br, gzip"}})
	plain := get(http.Header{"Accept-Encoding": {"gzip;q=0, identity"}})
	body, _ := io.ReadAll(plain.Body)
	if zipped.Header.Get("Content-Encoding") != "gzip" || plain.Header.Get("Content-Encoding") != "" || string(body) != "the bundle" {
		t.Fatalf("gzip: %v; without: %v %q", zipped.Header, plain.Header, body)
	}
	if zipped.Header.Get("ETag") == plain.Header.Get("ETag") {
		t.Error("both representations have one tag")
	}
	if again := get(http.Header{"Accept-Encoding": {"gzip"}, "If-None-Match": {zipped.Header.Get("ETag")}}); again.StatusCode != http.StatusNotModified {
		t.Errorf("a current tag: %d, want 304", again.StatusCode)
	}
}

// TestAcceptsGzip reads Accept-Encoding as RFC 9110 does.
func TestAcceptsGzip(t *testing.T) {
	for value, want := range map[string]bool{
		"gzip": true, "GZIP;q=0.5": true, "x-gzip": true, "*": true, "br, *;q=0.1": true,
		"": false, "identity": false, "gzip;q=0": false, "gzip; q=0.000": false, "*;q=0": false, "gzip;q=0, *": false,
	} {
		if got := acceptsGzip([]string{value}); got != want {
			t.Errorf("Accept-Encoding %q: gzip %v, want %v", value, got, want)
		}
	}
}
