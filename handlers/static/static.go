// Package static serves the files of an embedded folder (the browser page, the OpenAPI document)
// as the routes of their paths: one GET route for each file, with an entity tag of its content, a
// gzipped file served as it is to clients that take gzip, and a folder's index.html at the folder.
package static

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"
)

// Route is one route of a file: a ServeMux pattern ("GET /path") and what serves it.
type Route struct {
	Pattern string
	Handler http.Handler
}

// Routes returns one GET route for each file of fsys, and one at a folder for its index.html.
// Listing every file as a route means the mux knows exactly which paths exist (404 elsewhere, 405
// for other methods), there are no directory listings, and no request path can reach outside
// fsys. Files and folders whose names begin with a dot are not served.
func Routes(fsys fs.FS) ([]Route, error) {
	var routes []Route
	add := func(pattern string, h http.Handler) { routes = append(routes, Route{pattern, h}) }
	err := fs.WalkDir(fsys, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if name != "." && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		if !isPlainPath(name) {
			return fmt.Errorf("static file %q: use only letters, digits, '-', '_', '.' and '/' in names", name)
		}
		content, err := fs.ReadFile(fsys, name)
		if err != nil {
			return err
		}
		if plain, ok := strings.CutSuffix(name, ".gz"); ok {
			add("GET /"+plain, servePrecompressed(plain, content))
			return nil
		}
		// The files change only with the binary, so their tag is their content's digest. no-cache
		// lets browsers keep a copy but ask each time, which a matching tag answers with a 304:
		// a new release is picked up at once without renaming files.
		tag := fmt.Sprintf(`"%x"`, sha256.Sum256(content))
		serve := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.Contains(r.Header.Get("Range"), ",") {
				// Many small ranges make a multipart answer far larger than the file (each part has
				// its own headers), and no browser asks for more than one: the whole file is the
				// answer (RFC 9110 section 14.2 lets a server ignore Range).
				r.Header.Del("Range")
			}
			w.Header().Set("ETag", tag)
			w.Header().Set("Cache-Control", "no-cache")
			http.ServeFileFS(w, r, fsys, name) // answers If-None-Match with 304, sets Content-Type
		})
		add("GET /"+name, serve) // ServeFileFS redirects .../index.html to .../
		if path.Base(name) == "index.html" {
			folder := strings.TrimSuffix("/"+name, "index.html")
			add("GET "+folder+"{$}", serve)
			if folder != "/" { // /docs is /docs/, as a folder's URL
				add("GET "+strings.TrimSuffix(folder, "/"), http.RedirectHandler(folder, http.StatusMovedPermanently))
			}
		}
		return nil
	})
	return routes, err
}

// servePrecompressed serves a file kept gzipped (name.gz) at name: as it is, with Content-Encoding
// gzip, to a client that accepts gzip, and inflated for any other. A file too large to keep in the
// repository as it is (the API reference's bundle) is kept this way; browsers all take gzip, so the
// inflated copy is made only if some other client asks, and then once.
func servePrecompressed(name string, compressed []byte) http.Handler {
	// Looked up at the first request, as ServeFileFS does for the other files: the first lookup
	// loads the system's whole table of types into the heap, where every garbage collection of a
	// service that may never serve its page would scan it.
	contentType := sync.OnceValue(func() string { return mime.TypeByExtension(path.Ext(name)) })
	digest := fmt.Sprintf("%x", sha256.Sum256(compressed))
	gzipTag, plainTag := `"`+digest+`-gzip"`, `"`+digest+`"` // one tag for each representation
	inflated := sync.OnceValues(func() ([]byte, error) {
		zr, err := gzip.NewReader(bytes.NewReader(compressed))
		if err != nil {
			return nil, err
		}
		return io.ReadAll(zr)
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Del("Range") // the whole file, as for the others (see Routes)
		h := w.Header()
		h.Set("Content-Type", contentType())
		h.Set("Cache-Control", "no-cache")
		h.Add("Vary", "Accept-Encoding")
		content, tag := compressed, gzipTag
		if acceptsGzip(r.Header.Values("Accept-Encoding")) {
			h.Set("Content-Encoding", "gzip")
		} else {
			plain, err := inflated()
			if err != nil { // the build wrote a broken file: a fault, not the client's
				panic(fmt.Sprintf("static file %s.gz does not inflate: %v", name, err))
			}
			content, tag = plain, plainTag
		}
		h.Set("ETag", tag)
		http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(content)) // answers If-None-Match
	})
}

// acceptsGzip reports whether Accept-Encoding lets the answer be gzip (RFC 9110 section 12.5.3):
// gzip listed without q=0, or, when gzip is not listed, * without q=0.
func acceptsGzip(values []string) bool {
	gzip, star := "", ""
	for _, value := range values {
		for part := range strings.SplitSeq(value, ",") {
			coding, params, _ := strings.Cut(part, ";")
			switch strings.ToLower(strings.TrimSpace(coding)) {
			case "gzip", "x-gzip":
				gzip = "q" + params
			case "*":
				star = "q" + params
			}
		}
	}
	if gzip != "" {
		return !refused(gzip)
	}
	return star != "" && !refused(star)
}

// refused reports whether a coding's parameters ("q" and what followed it) give it q=0.
func refused(params string) bool {
	q := strings.ReplaceAll(strings.ToLower(params), " ", "")
	_, weight, ok := strings.Cut(q, "q=")
	return ok && strings.Trim(weight, "0.") == ""
}

// isPlainPath accepts names that need no escaping in a URL or a ServeMux pattern.
func isPlainPath(name string) bool {
	for _, c := range []byte(name) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-_./", c) >= 0) {
			return false
		}
	}
	return true
}
