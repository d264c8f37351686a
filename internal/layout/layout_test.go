package layout

import (
	"fmt"
	"go/build/constraint"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/headroom-ml/headroom/"

// source is one non-test Go file of the module, whatever its build tags.
type source struct {
	pkg        string          // its package's path relative to the module root ("backend/cuda")
	path       string          // its path relative to the module root
	imports    []string        // every import path, of the module or not
	constraint constraint.Expr // its //go:build line, nil if none
}

// sources parses the imports and build constraint of every non-test Go file
// of the module (outside testdata and hidden directories).
func sources(t *testing.T) []source {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root %s: %v", root, err)
	}
	var out []source
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly|parser.ParseComments)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		src := source{pkg: filepath.ToSlash(filepath.Dir(rel)), path: filepath.ToSlash(rel)}
		for _, im := range f.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			src.imports = append(src.imports, p)
		}
		// A build constraint is a //go:build line among the comments above
		// the package clause.
		for _, g := range f.Comments {
			if g.Pos() >= f.Package {
				break
			}
			for _, c := range g.List {
				if constraint.IsGoBuild(c.Text) {
					x, err := constraint.Parse(c.Text)
					if err != nil {
						return fmt.Errorf("%s: %w", rel, err)
					}
					src.constraint = x
				}
			}
		}
		out = append(out, src)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// imports returns, for every package of the module (by path relative to
// the module root), the module packages its non-test files import.
func imports(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, src := range sources(t) {
		if _, ok := out[src.pkg]; !ok {
			out[src.pkg] = nil
		}
		for _, p := range src.imports {
			if strings.HasPrefix(p, module) {
				out[src.pkg] = append(out[src.pkg], strings.TrimPrefix(p, module))
			}
		}
	}
	return out
}

// closure returns every module package pkg imports, directly or not.
func closure(deps map[string][]string, pkg string) map[string]bool {
	seen := map[string]bool{}
	var visit func(p string)
	visit = func(p string) {
		for _, d := range deps[p] {
			if !seen[d] {
				seen[d] = true
				visit(d)
			}
		}
	}
	visit(pkg)
	return seen
}

func under(pkg, prefix string) bool { return pkg == prefix || strings.HasPrefix(pkg, prefix+"/") }

// TestImportRules checks the seams: the planner knows no device, the model
// vocabulary knows no planner or device, reports and data sets know no
// trainer, and only the command imports the CLI.
func TestImportRules(t *testing.T) {
	deps := imports(t)
	for _, want := range []string{"compile", "graph", "autodiff", "nn", "optim", "step", "backend/cpu", "backend/sim", "backend/cuda", "runtime", "train", "internal/cli", "cmd/headroom", "kernels", "datasets", "profile", "data"} {
		if _, ok := deps[want]; !ok {
			t.Fatalf("package %s not found: the test would check nothing", want)
		}
	}
	rules := []struct {
		pkgs      []string // packages (and their subpackages) the rule is about
		forbidden []string // what they may not import, directly or not
		why       string
	}{
		{[]string{"compile"}, []string{"kernels", "backend", "runtime"},
			"compile is device-neutral: it asks a Target"},
		{[]string{"graph", "autodiff", "nn", "optim"}, []string{"compile", "runtime", "kernels", "backend", "step", "train"},
			"models and their math know no planner or device"},
		{[]string{"step"}, []string{"runtime", "kernels", "backend", "train"},
			"the step builder builds graphs for any target"},
		{[]string{"datasets", "profile"}, []string{"train"},
			"data sets and reports do not depend on the trainer"},
		{[]string{"mem", "tensor"}, []string{"graph", "compile", "runtime", "kernels", "backend", "train", "internal/site"},
			"memory and tensors sit below everything"},
	}
	for _, r := range rules {
		for pkg := range deps {
			mine := false
			for _, p := range r.pkgs {
				mine = mine || under(pkg, p)
			}
			if !mine {
				continue
			}
			var bad []string
			for d := range closure(deps, pkg) {
				for _, f := range r.forbidden {
					if under(d, f) {
						bad = append(bad, d)
					}
				}
			}
			sort.Strings(bad)
			if len(bad) > 0 {
				t.Errorf("%s imports %v (directly or not): %s", pkg, bad, r.why)
			}
		}
	}
	for pkg, ds := range deps {
		for _, d := range ds {
			if d == "internal/cli" && !under(pkg, "cmd") {
				t.Errorf("%s imports internal/cli: only cmd/ may", pkg)
			}
		}
	}
}
