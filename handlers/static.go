// Static files of the browser page, served at the URL root from the embedded web/public folder.
package handlers

import (
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
func addStaticRoutes(mux *http.ServeMux, fsys fs.FS) error {
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
		serve := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.ServeFileFS(w, r, fsys, name) })
		mux.Handle("GET /"+name, serve) // ServeFileFS redirects .../index.html to .../
		if path.Base(name) == "index.html" {
			mux.Handle("GET "+strings.TrimSuffix("/"+name, "index.html")+"{$}", serve)
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
