package handlers

import (
	"io/fs"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"usersd/internal/apitest"
	"usersd/scim"
	"usersd/web"
)

// TestTheDocumentHasEveryRESTRoute holds openapi.json to the routes New registers: every route
// that is not an RPC or a file of the page is an operation of the document, and every operation
// of the document is a route. (The end-to-end tests in cmd/usersd check the answers.)
func TestTheDocumentHasEveryRESTRoute(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(apitest.OpenAPIDocument())
	if err != nil {
		t.Fatal(err)
	}
	svc, _ := startRouteTestService(t)
	pageFiles := map[string]bool{"/{$}": true}
	fs.WalkDir(web.Public, ".", func(name string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			// What static.Routes serves for a file: itself, a gzipped file without .gz, and for
			// a folder's index.html the folder (with and without its slash).
			pageFiles["/"+name] = true
			pageFiles["/"+strings.TrimSuffix(name, ".gz")] = true
			if folder, ok := strings.CutSuffix("/"+name, "/index.html"); ok && folder != "" {
				pageFiles[folder] = true
				pageFiles[folder+"/{$}"] = true
			}
		}
		return err
	})

	registered := map[string]bool{}
	for _, r := range svc.routes {
		method, path, ok := strings.Cut(r.pattern, " ")
		if !ok {
			method, path = "", r.pattern
		}
		// SCIM's routes are described by SCIM's own discovery documents (/scim/v2/Schemas and the
		// rest), as identity providers read them, not by the REST contract.
		if isRPCRoute(path) || pageFiles[path] || strings.HasPrefix(path, scim.Prefix+"/") {
			continue
		}
		if method == "" {
			t.Errorf("route %q takes every method, which no operation of the document can describe", r.pattern)
			continue
		}
		registered[method+" "+path] = true
		item := doc.Paths.Value(path)
		if item == nil || item.GetOperation(method) == nil {
			t.Errorf("route %q is not in openapi.json", r.pattern)
		}
	}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			if !registered[method+" "+path] {
				t.Errorf("openapi.json describes %s %s, which is not a route", method, path)
			}
		}
	}
	if len(registered) < 14 {
		t.Errorf("found %d REST routes, want at least the 14 of docs/API.md#the-routes", len(registered))
	}
}

// isRPCRoute reports whether a route's path is an RPC's, /package.Service/Method.
func isRPCRoute(path string) bool {
	service, method, ok := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	return ok && strings.Contains(service, ".") && method != ""
}
