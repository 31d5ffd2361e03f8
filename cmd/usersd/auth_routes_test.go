package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"path/filepath"
	"strings"
	"testing"

	"usersd/handlers"
)

// handlersSource is the handlers package, read by TestAPIKeyComparisonIsConstantTime.
const handlersSource = "../../handlers"

// parseHandlersSource parses the non-test Go files of the handlers package.
func parseHandlersSource(t *testing.T) (*token.FileSet, []*ast.File) {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(handlersSource, "*.go"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no Go files in %s: %v", handlersSource, err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return fset, files
}

// TestAPIKeysRejectNearMisses checks handlers.APIKeys at the unit level: only an exact key passes,
// however much of a valid key another shares.
func TestAPIKeysRejectNearMisses(t *testing.T) {
	const other = "second-key-for-rotation-abcdef"
	keys := handlers.NewAPIKeys(testKey, other, "")
	if keys.Len() != 2 {
		t.Fatalf("Len %d, want 2 (the empty key is ignored)", keys.Len())
	}
	for _, key := range []string{testKey, other} {
		if !keys.Valid(key) {
			t.Errorf("Valid(%q) is false", key)
		}
	}
	flipLast := testKey[:len(testKey)-1] + "X"
	flipFirst := "X" + testKey[1:]
	for _, c := range []struct{ name, key string }{
		{"empty", ""},
		{"all but the last character (a prefix)", testKey[:len(testKey)-1]},
		{"the first character only", testKey[:1]},
		{"the last character changed (the longest shared prefix)", flipLast},
		{"the first character changed (no shared prefix)", flipFirst},
		{"the key and one more character", testKey + "0"},
		{"the key twice", testKey + testKey},
		{"the key with a NUL byte after it", testKey + "\x00"},
		{"the key in upper case", strings.ToUpper(testKey)},
		{"the key with spaces around it", " " + testKey + " "},
		{"the two keys joined", testKey + "," + other},
		{"a long key that starts with the key", testKey + strings.Repeat("x", 1<<16)},
	} {
		if keys.Valid(c.key) {
			t.Errorf("Valid(%s) is true", c.name)
		}
	}
}

// TestAPIKeyComparisonIsConstantTime checks by reading handlers/auth.go that APIKeys.Valid compares
// keys in constant time: fixed-length SHA-256 digests compared with subtle.ConstantTimeCompare
// against every key, and no comparison of key text that could stop at the first difference. A
// timing measurement would be flaky; this is the property that makes the timing flat.
func TestAPIKeyComparisonIsConstantTime(t *testing.T) {
	_, files := parseHandlersSource(t)
	funcs := map[string]*ast.FuncDecl{} // methods of APIKeys by name
	for _, f := range files {
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || len(fn.Recv.List) != 1 {
				continue
			}
			if star, ok := fn.Recv.List[0].Type.(*ast.StarExpr); ok {
				if id, ok := star.X.(*ast.Ident); ok && id.Name == "APIKeys" {
					funcs[fn.Name.Name] = fn
				}
			}
		}
	}
	if funcs["Valid"] == nil {
		t.Fatal("no method (*APIKeys).Valid in the handlers package")
	}

	// Valid and the methods of APIKeys it calls, transitively.
	var body []*ast.FuncDecl
	queue, visited := []string{"Valid"}, map[string]bool{}
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		if visited[name] || funcs[name] == nil {
			continue
		}
		visited[name] = true
		body = append(body, funcs[name])
		ast.Inspect(funcs[name].Body, func(n ast.Node) bool {
			if call, ok := n.(*ast.CallExpr); ok {
				if sel, ok := call.Fun.(*ast.SelectorExpr); ok {
					queue = append(queue, sel.Sel.Name)
				}
			}
			return true
		})
	}

	forbidden := map[string]bool{
		"bytes.Equal": true, "bytes.Compare": true, "bytes.HasPrefix": true,
		"strings.EqualFold": true, "strings.Compare": true, "strings.HasPrefix": true, "strings.HasSuffix": true,
		"strings.Contains": true, "slices.Equal": true, "reflect.DeepEqual": true, "maps.Equal": true,
	}
	var constantTime, digests bool
	for _, fn := range body {
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.CallExpr:
				name := types.ExprString(x.Fun)
				switch {
				case name == "subtle.ConstantTimeCompare":
					constantTime = true
				case name == "sha256.Sum256":
					digests = true
				case forbidden[name]:
					t.Errorf("(*APIKeys).%s calls %s, which returns at the first difference", fn.Name.Name, name)
				}
			case *ast.BinaryExpr:
				// Comparing with a constant ("" or 1) says nothing about a key's content; comparing two
				// values of key material can stop at the first differing byte.
				if (x.Op == token.EQL || x.Op == token.NEQ) && !astIsBasicLit(x.X) && !astIsBasicLit(x.Y) {
					t.Errorf("(*APIKeys).%s compares %s with ==/!=; use subtle.ConstantTimeCompare", fn.Name.Name, types.ExprString(x))
				}
			case *ast.RangeStmt:
				// Every key is compared: leaving the loop at the first match would tell which key matched.
				ast.Inspect(x.Body, func(n ast.Node) bool {
					switch y := n.(type) {
					case *ast.ReturnStmt:
						t.Errorf("(*APIKeys).%s returns from inside its loop over the keys", fn.Name.Name)
					case *ast.BranchStmt:
						if y.Tok == token.BREAK {
							t.Errorf("(*APIKeys).%s breaks out of its loop over the keys", fn.Name.Name)
						}
					}
					return true
				})
			}
			return true
		})
	}
	if !constantTime {
		t.Error("(*APIKeys).Valid does not compare with subtle.ConstantTimeCompare")
	}
	if !digests {
		t.Error("(*APIKeys).Valid does not hash the key with sha256.Sum256: comparing keys of different lengths in constant time needs fixed-length digests")
	}
}

func astIsBasicLit(e ast.Expr) bool {
	_, ok := e.(*ast.BasicLit)
	return ok
}

// BenchmarkAPIKeyCheck times APIKeys.Valid for keys that share nothing, a long prefix, or everything
// with a valid key. Not a test: compare the numbers with benchstat, e.g.
//
//	go test -run '^$' -bench APIKeyCheck -count 10 ./cmd/usersd | benchstat -col /key -
func BenchmarkAPIKeyCheck(b *testing.B) {
	valid := strings.Repeat("k", 64)
	keys := handlers.NewAPIKeys(valid, "another-valid-key")
	for _, c := range []struct{ name, key string }{
		{"key=no-shared-prefix", "X" + valid[1:]},
		{"key=long-shared-prefix", valid[:63] + "X"},
		{"key=exact", valid},
		{"key=short", "k"},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				keys.Valid(c.key)
			}
		})
	}
}
