package layout

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLIIsWiring: the command's package holds flags, a configuration,
// one library call and printing, no training logic: no file over 300
// lines and no function over 60 (what a subcommand does lives in train,
// data and the packages below them, where the other callers share it).
func TestCLIIsWiring(t *testing.T) {
	const maxFile, maxFunc = 300, 60
	dir := filepath.Join("..", "cli")
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files in %s (%v): the test would check nothing", dir, err)
	}
	fset := token.NewFileSet()
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(src), "\n"); n > maxFile {
			t.Errorf("%s has %d lines, want at most %d", path, n, maxFile)
		}
		f, err := parser.ParseFile(fset, path, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			lines := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1
			if lines > maxFunc {
				t.Errorf("%s: func %s has %d lines, want at most %d", path, fn.Name.Name, lines, maxFunc)
			}
		}
	}
}
