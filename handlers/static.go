// Static files of the browser page, served at the URL root from the embedded web/public folder.
package handlers

import (
	"crypto/sha256"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

// addStaticRoutes registers one GET route for each file of fsys, and "/" for its index.html. Listing
// every file as a route means the mux knows exactly which paths exist (404 elsewhere, 405 for other
// methods), there are no directory listings, and no request path can reach outside fsys. Files and
// folders whose names begin with a dot are not served.
func addStaticRoutes(routes *routeTable, fsys fs.FS) error {
	return fs.WalkDir(fsys, ".", func(name string, d fs.DirEntry, err error) error {
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
		routes.public("GET /"+name, serve, "") // ServeFileFS redirects .../index.html to .../
		if path.Base(name) == "index.html" {
			routes.public("GET "+strings.TrimSuffix("/"+name, "index.html")+"{$}", serve, "")
		}
		return nil
	})
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
