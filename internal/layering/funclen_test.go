package layering

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// maxFuncLines is issue #11's limit: no production function is longer
// (lines from "func" to the closing brace).
const maxFuncLines = 150

// knownGiants are functions allowed over the limit (file and
// Receiver.Name), logged instead of failing. None are left.
var knownGiants = map[string]bool{}

// TestNoGiantFunctions fails for a function of a non-test Go file of the
// module longer than maxFuncLines that is not a known giant.
func TestNoGiantFunctions(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	files := 0
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		files++
		for fn, n := range funcLengths(t, p) {
			if n <= maxFuncLines {
				continue
			}
			key := filepath.ToSlash(rel) + " " + fn
			if knownGiants[key] {
				t.Logf("known giant: %s: %d lines", key, n)
				continue
			}
			t.Errorf("%s: %d lines (at most %d): split it into named phases", key, n, maxFuncLines)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 50 {
		t.Fatalf("found only %d Go files under %s", files, root)
	}
}

// funcLengths gives the length in lines of every function with a body in
// the file, by "Name" or "Receiver.Name".
func funcLengths(t *testing.T, path string) map[string]int {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, decl := range f.Decls {
		fd, ok := decl.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		name := fd.Name.Name
		if fd.Recv != nil && len(fd.Recv.List) == 1 {
			typ := fd.Recv.List[0].Type
			if s, ok := typ.(*ast.StarExpr); ok {
				typ = s.X
			}
			if ix, ok := typ.(*ast.IndexExpr); ok { // generic receiver
				typ = ix.X
			}
			if id, ok := typ.(*ast.Ident); ok {
				name = id.Name + "." + name
			}
		}
		out[name] = fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
	}
	return out
}
