package datasets

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// pythonWithNumpy returns a python3 that imports numpy (/usr/bin/python3
// first, then python3 on PATH), or skips the test saying why not.
func pythonWithNumpy(t *testing.T) string {
	t.Helper()
	var tried []string
	for _, py := range []string{"/usr/bin/python3", "python3"} {
		p, err := exec.LookPath(py)
		if err != nil {
			tried = append(tried, fmt.Sprintf("%s: %v", py, err))
			continue
		}
		if out, err := exec.Command(p, "-c", "import numpy").CombinedOutput(); err != nil {
			tried = append(tried, fmt.Sprintf("%s: %v %s", p, err, bytes.TrimSpace(out)))
			continue
		}
		return p
	}
	t.Skipf("no python3 with numpy to run peers/common.py's go_corpus (apt-get install python3-numpy): %s", strings.Join(tried, "; "))
	return ""
}

// peersDir returns the folder of peers/common.py: $HEADROOM_PEERS, else
// shared/peers in this folder or one of its parents (the checkout's
// ../shared), or skips the test.
func peersDir(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("HEADROOM_PEERS"); d != "" {
		return d
	}
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	for {
		p := filepath.Join(dir, "shared", "peers")
		if _, err := os.Stat(filepath.Join(p, "common.py")); err == nil {
			return p
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Skip("no shared/peers/common.py above this folder: set HEADROOM_PEERS to the peers' folder")
		}
		dir = parent
	}
}

// splitSummary is what both sides print of a corpus: each split's length
// and SHA-256.
func splitSummary(train, val []byte) string {
	th, vh := sha256.Sum256(train), sha256.Sum256(val)
	return fmt.Sprintf("train %d sha256 %s val %d sha256 %s", len(train), hex.EncodeToString(th[:]), len(val), hex.EncodeToString(vh[:]))
}

// pythonCorpus runs peers/common.py's go_corpus(root) and returns its
// splitSummary.
func pythonCorpus(t *testing.T, root string) string {
	t.Helper()
	py, peers := pythonWithNumpy(t), peersDir(t)
	script := `import hashlib, sys
sys.path.insert(0, sys.argv[1])
from common import go_corpus
tr, va = go_corpus(sys.argv[2])
print("train %d sha256 %s val %d sha256 %s" % (len(tr), hashlib.sha256(tr.tobytes()).hexdigest(), len(va), hashlib.sha256(va.tobytes()).hexdigest()))`
	out, err := exec.Command(py, "-c", script, peers, root).Output()
	if err != nil {
		t.Fatalf("%s go_corpus(%q): %v", py, root, err)
	}
	return strings.TrimSpace(string(out))
}

// TestGoSrcMatchesPython reads the real go-src and compares it with
// peers/common.py's go_corpus, byte for byte (by SHA-256).
func TestGoSrcMatchesPython(t *testing.T) {
	c, err := GoSrc()
	if err != nil {
		t.Fatal(err)
	}
	got := splitSummary(c.Train, c.Val)
	t.Logf("go-src: %s: %d files, %d bytes; %s", c.Root, c.Files, len(c.Train)+len(c.Val), got)
	if want := pythonCorpus(t, c.Root); got != want {
		t.Errorf("got %s, want go_corpus's %s", got, want)
	}
}

// writeTree writes files (relative path: contents) under a new folder.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for rel, body := range files {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// TestGoSrcFrom builds go-src from a small hand-made tree: test files,
// testdata folders (at any depth) and other extensions are left out, hidden
// files are kept, and the files are joined in sorted path order.
func TestGoSrcFrom(t *testing.T) {
	root := writeTree(t, map[string]string{
		"ast/ast.go":                   "package ast\n",
		"ast.x/b.go":                   "B", // walked after ast/, sorted before it ('.' < '/')
		"ast/ast_test.go":              "package ast // test\n",
		"ast/testdata/x.go":            "package x\n",
		"types/internal/testdata/y.go": "package y\n",
		"types/api.go":                 "package types",
		"doc/readme.txt":               "not go",
		".hidden.go":                   "H",
		"testdata.go":                  "T", // a file, not a folder: kept
		"Z.go":                         "Z",
		"z.go":                         "z",
		"é.go":                         "e",
	})
	c, err := GoSrcFrom(root)
	if err != nil {
		t.Fatal(err)
	}
	want := "H\n" + "Z\n" + "B\n" + "package ast\n\n" + "T\n" + "package types\n" + "z\n" + "e\n"
	if got := string(c.Train) + string(c.Val); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if cut := len(want) * 9 / 10; len(c.Train) != cut || cap(c.Train) != cut {
		t.Errorf("got Train of length %d and capacity %d, want %d (90%%) for both", len(c.Train), cap(c.Train), cut)
	}
	if c.Files != 8 || c.Name != "go-src" || c.Root != root {
		t.Errorf("got %d files, name %q, root %q; want 8, go-src, %q", c.Files, c.Name, c.Root, root)
	}
	t.Run("python", func(t *testing.T) {
		if got, want := splitSummary(c.Train, c.Val), pythonCorpus(t, root); got != want {
			t.Errorf("got %s, want go_corpus's %s", got, want)
		}
	})
}

func TestGoSrcFromErrors(t *testing.T) {
	empty := writeTree(t, map[string]string{"a/readme.txt": "x", "b/testdata/c.go": "package c"})
	file := filepath.Join(empty, "a", "readme.txt")
	missing := filepath.Join(empty, "missing")
	for _, tc := range []struct {
		name, root, want string
	}{
		{"no .go files", empty, "no .go files under " + empty},
		{"a file", file, file + " is not a folder"},
		{"missing", missing, missing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := GoSrcFrom(tc.root)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestGoRoot checks the order: GOROOT, then `go env GOROOT` (a fake go
// command on PATH), then runtime.GOROOT().
func TestGoRoot(t *testing.T) {
	fakeGo := func(script string) string {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "go"), []byte("#!/bin/sh\n"+script+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	printsRoot := fakeGo(`[ "$1 $2" = "env GOROOT" ] && echo /from/go/env`)
	fails := fakeGo("exit 1")
	for _, tc := range []struct {
		name, goroot, path, want string
	}{
		{"GOROOT set", "/from/environment", printsRoot, "/from/environment"},
		{"go env", "", printsRoot, "/from/go/env"},
		{"go env fails", "", fails, runtime.GOROOT()},
		{"no go command", "", t.TempDir(), runtime.GOROOT()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("GOROOT", tc.goroot) // restored after the test
			if tc.goroot == "" {
				os.Unsetenv("GOROOT")
			}
			t.Setenv("PATH", tc.path)
			got, err := GoRoot()
			if err != nil || got != tc.want {
				t.Errorf("got %q (%v), want %q", got, err, tc.want)
			}
		})
	}
}
