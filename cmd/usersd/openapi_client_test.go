package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"usersd/internal/apitest"
	"usersd/internal/proctest"
)

// webTools finds node and the page's npm tools (web/node_modules, from npm ci in web/), tool among
// them. Without them the test is skipped, saying how to run it, unless USERS_REQUIRE_NODE=1 (CI).
func webTools(t *testing.T, tool string) (node, bin string) {
	t.Helper()
	bin, err := filepath.Abs("../../web/node_modules/.bin")
	if err != nil {
		t.Fatal(err)
	}
	node, err = exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(bin, tool))
	}
	if err != nil {
		proctest.MissingTool(t, "USERS_REQUIRE_NODE", "needs node and the page's npm tools ("+err.Error()+"): run npm ci in web/")
	}
	return node, bin
}

// TestAClientGeneratedFromTheDocumentWorks generates a TypeScript client from the document the
// binary serves (openapi-typescript), type-checks web/openapi-client/client-test.ts against it, and
// runs it against that binary: create, list with paging, patch with If-Match, delete.
func TestAClientGeneratedFromTheDocumentWorks(t *testing.T) {
	node, bin := webTools(t, "openapi-typescript")
	_, s, _ := startProcess(t, filepath.Join(t.TempDir(), "users.db"))
	work := t.TempDir()
	modules := filepath.Dir(bin)
	run := func(what string, env []string, name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = work
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", what, err, out)
		}
		return string(out)
	}
	source, err := os.ReadFile("../../web/openapi-client/client-test.ts")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "client-test.ts"), source, 0o644); err != nil {
		t.Fatal(err)
	}
	run("generate the client's types from /openapi.json", nil,
		filepath.Join(bin, "openapi-typescript"), s.BaseURL+"/openapi.json", "-o", "schema.d.ts")
	tsconfig := `{"compilerOptions": {"strict": true, "noEmit": true, "target": "es2022", "module": "esnext",
		"moduleResolution": "bundler", "types": [], "lib": ["es2022", "dom"],
		"paths": {"openapi-fetch": ["` + filepath.Join(modules, "openapi-fetch") + `"]}},
		"files": ["client-test.ts"]}`
	if err := os.WriteFile(filepath.Join(work, "tsconfig.json"), []byte(tsconfig), 0o644); err != nil {
		t.Fatal(err)
	}
	run("type-check the client against the generated types", nil, filepath.Join(bin, "tsc"), "-p", "tsconfig.json")
	run("bundle the client", []string{"NODE_PATH=" + modules}, filepath.Join(bin, "esbuild"), "client-test.ts",
		"--bundle", "--platform=node", "--format=esm", "--outfile=client-test.mjs")
	out := run("run the client against the binary", []string{"USERSD_URL=" + s.BaseURL, "USERSD_KEY=" + apitest.Key},
		node, "client-test.mjs")
	if !strings.Contains(out, ": ok") {
		t.Fatalf("the client did not finish: %s", out)
	}
	t.Log(strings.TrimSpace(out))
}
