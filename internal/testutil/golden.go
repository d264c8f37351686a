package testutil

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Update, set by `go test -update`, makes Golden rewrite golden files from
// the current output instead of comparing with them.
var Update = flag.Bool("update", false, "rewrite golden files")

// Golden compares got with the file testdata/<name>, relative to the test's
// package directory (go test runs tests there). On a mismatch it fails t
// with a line diff (-want +got); with -update it writes got to the file
// instead, creating directories as needed.
func Golden(t testing.TB, name string, got string) {
	t.Helper()
	golden(t, "testdata", name, got, *Update)
}

// GoldenIn is Golden with the golden files in dir instead of testdata.
func GoldenIn(t testing.TB, dir, name string, got string) {
	t.Helper()
	golden(t, dir, name, got, *Update)
}

func golden(t testing.TB, dir, name, got string, update bool) {
	t.Helper()
	path := filepath.Join(dir, name)
	if update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatalf("golden %s: %v", path, err)
			return
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatalf("golden %s: %v", path, err)
			return
		}
		t.Logf("golden %s: updated", path)
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("golden %s: %v (run go test -update to create it)", path, err)
		return
	}
	if string(want) == got {
		return
	}
	t.Fatalf("golden %s: output differs (-want +got; go test -update rewrites the file):\n%s", path, LineDiff(string(want), got))
}

// maxDiffCells bounds the LCS table of LineDiff (lines(want) × lines(got)).
const maxDiffCells = 4 << 20

// LineDiff returns a line diff of want and got ("" when they are equal):
// lines only in want start with "-", lines only in got with "+", and up to
// two unchanged lines of context around each change start with " "; longer
// unchanged runs are shown as "  ...". It uses a longest-common-subsequence
// table, and for very large inputs reports only the first differing line.
func LineDiff(want, got string) string {
	if want == got {
		return ""
	}
	a, b := strings.Split(want, "\n"), strings.Split(got, "\n")
	if len(a)*len(b) > maxDiffCells {
		i := 0
		for i < len(a) && i < len(b) && a[i] == b[i] {
			i++
		}
		var wl, gl string
		if i < len(a) {
			wl = a[i]
		}
		if i < len(b) {
			gl = b[i]
		}
		return fmt.Sprintf("first difference at line %d:\n-%s\n+%s\n", i+1, wl, gl)
	}
	// lcs[i][j] is the LCS length of a[i:] and b[j:].
	lcs := make([][]int32, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int32, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	type line struct {
		op   byte
		text string
	}
	var lines []line
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			lines = append(lines, line{' ', a[i]})
			i++
			j++
		case i < len(a) && (j == len(b) || lcs[i+1][j] >= lcs[i][j+1]):
			lines = append(lines, line{'-', a[i]})
			i++
		default:
			lines = append(lines, line{'+', b[j]})
			j++
		}
	}
	const context = 2
	near := func(k int) bool { // within context lines of a change
		for d := max(0, k-context); d <= min(len(lines)-1, k+context); d++ {
			if lines[d].op != ' ' {
				return true
			}
		}
		return false
	}
	var sb strings.Builder
	skipping := false
	for k, l := range lines {
		if l.op == ' ' && !near(k) {
			if !skipping {
				sb.WriteString("  ...\n")
				skipping = true
			}
			continue
		}
		skipping = false
		sb.WriteByte(l.op)
		sb.WriteString(l.text)
		sb.WriteByte('\n')
	}
	return sb.String()
}
