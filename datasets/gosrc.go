package datasets

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/headroom-ml/headroom/data"
)

// GoSrcValWindows is the number of windows the go-src validation loss is
// measured on: the first 64 non-overlapping windows of the validation split
// (data.Windows.Consecutive from 0), as peers/seq.py measures it.
const GoSrcValWindows = 64

// Corpus is a byte-level text data set split in two. Train and Val share
// one backing array (Train's capacity ends where Val starts), which the
// caller charges to its ledger as len(Train)+len(Val) bytes.
type Corpus struct {
	Name  string // "go-src"
	Root  string // the folder it was read from
	Files int    // how many files it joins
	Train []byte // the first 90% of the bytes
	Val   []byte // the rest
}

// GoSrc reads the built-in corpus go-src: the Go toolchain's own sources
// under GOROOT/src/go (go/ast, go/parser, go/types, ...), GOROOT as GoRoot
// finds it. See GoSrcFrom.
func GoSrc() (*Corpus, error) {
	goroot, err := GoRoot()
	if err != nil {
		return nil, err
	}
	return GoSrcFrom(filepath.Join(goroot, "src", "go"))
}

// GoSrcFrom reads go-src from root (GOROOT/src/go): every .go file under it
// that is not a _test.go file and not under a folder named testdata,
// hidden ones included, sorted by path relative to root, each followed by
// "\n"; Train is the first len*9/10 bytes and Val the rest. This is
// peers/common.py's go_corpus byte for byte (its test compares SHA-256
// hashes), except that a folder or file it cannot read is an error here,
// where os.walk would skip the folder silently.
func GoSrcFrom(root string) (*Corpus, error) {
	if fi, err := os.Stat(root); err != nil {
		return nil, fmt.Errorf("datasets: go-src: %w", err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("datasets: go-src: %s is not a folder", root)
	}
	opt := goSrcOptions()
	files, err := data.TextFiles(root, opt)
	if err != nil {
		return nil, fmt.Errorf("datasets: go-src: %w", err)
	}
	text, err := data.ReadTextFiles(files, opt)
	if err != nil {
		return nil, fmt.Errorf("datasets: go-src: %w", err)
	}
	if len(text) == 0 {
		return nil, fmt.Errorf("datasets: go-src: no .go files under %s", root)
	}
	cut := len(text) * 9 / 10
	return &Corpus{Name: "go-src", Root: root, Files: len(files), Train: text[:cut:cut], Val: text[cut:]}, nil
}

// goSrcOptions selects go_corpus's files: os.walk skips no hidden names,
// prunes folders named testdata, and keeps names ending in .go but not in
// _test.go.
func goSrcOptions() data.TextOptions {
	return data.TextOptions{Separator: true, Hidden: true, Keep: func(rel string, dir bool) bool {
		name := path.Base(rel)
		if dir {
			return name != "testdata"
		}
		return strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go")
	}}
}

// GoRoot returns the Go root go-src is read from: the GOROOT environment
// variable if set, else what `go env GOROOT` prints (the go command on
// PATH, given 10 seconds), else runtime.GOROOT() (the root this binary was
// built with, if it knows it). The first two are what peers/common.py
// asks, in that order.
func GoRoot() (string, error) {
	if r := os.Getenv("GOROOT"); r != "" {
		return r, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "go", "env", "GOROOT").Output(); err == nil {
		if r := strings.TrimSpace(string(out)); r != "" {
			return r, nil
		}
	}
	if r := runtime.GOROOT(); r != "" {
		return r, nil
	}
	return "", fmt.Errorf("datasets: go-src needs a Go installation: GOROOT is unset, `go env GOROOT` failed and this binary does not know its GOROOT")
}

// GoSrcSet lists go-src's files (GoSrc's, under GoRoot) without reading
// them: a trainer plans with its size and reads it once the plan fits.
func GoSrcSet() (*data.TextSet, error) {
	goroot, err := GoRoot()
	if err != nil {
		return nil, err
	}
	root := filepath.Join(goroot, "src", "go")
	if fi, err := os.Stat(root); err != nil {
		return nil, fmt.Errorf("datasets: go-src: %w", err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("datasets: go-src: %s is not a folder", root)
	}
	s, err := data.NewTextSet("go-src", root, goSrcOptions())
	if err != nil {
		return nil, fmt.Errorf("datasets: go-src: %w", err)
	}
	return s, nil
}
