package testutil

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestGolden(t *testing.T) {
	dir := t.TempDir()
	const name = "sub/plan.txt"
	const text = "param  w  [784, 128]\nparam  b  [128]\ngrad   w  [784, 128]\n"

	// A missing file fails and says how to create it.
	r := &recorder{TB: t}
	golden(r, dir, name, text, false)
	if !r.failed || !strings.Contains(r.msg, "-update") {
		t.Fatalf("missing golden file: failed=%v msg=%q, want a failure mentioning -update", r.failed, r.msg)
	}

	// -update writes the file, creating directories.
	r = &recorder{TB: t}
	golden(r, dir, name, text, true)
	if r.failed {
		t.Fatalf("update failed: %s", r.msg)
	}
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil || string(b) != text {
		t.Fatalf("golden file holds %q (err %v), want %q", b, err, text)
	}

	// The same output matches.
	r = &recorder{TB: t}
	golden(r, dir, name, text, false)
	if r.failed {
		t.Fatalf("matching output failed: %s", r.msg)
	}

	// A changed line is a failure with a diff that names both versions.
	changed := strings.Replace(text, "[128]\n", "[256]\n", 1)
	r = &recorder{TB: t}
	GoldenIn(r, dir, name, changed)
	if !r.failed {
		t.Fatal("changed output passed the golden check")
	}
	for _, want := range []string{"-param  b  [128]", "+param  b  [256]", filepath.Join(dir, name)} {
		if !strings.Contains(r.msg, want) {
			t.Errorf("mismatch message lacks %q:\n%s", want, r.msg)
		}
	}

	// A missing trailing newline is a difference too.
	r = &recorder{TB: t}
	golden(r, dir, name, strings.TrimSuffix(text, "\n"), false)
	if !r.failed {
		t.Error("output without the final newline passed the golden check")
	}
}

func TestLineDiff(t *testing.T) {
	tests := []struct {
		name, want, got, diff string
	}{
		{"equal", "a\nb", "a\nb", ""},
		{"changed line", "a\nb\nc", "a\nx\nc", " a\n-b\n+x\n c\n"},
		{"inserted", "a\nc", "a\nb\nc", " a\n+b\n c\n"},
		{"deleted", "a\nb\nc", "a\nc", " a\n-b\n c\n"},
		{"context elided", "1\n2\n3\n4\n5\n6\n7", "1\n2\n3\n4\n5\n6\nX",
			"  ...\n 5\n 6\n-7\n+X\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := LineDiff(tc.want, tc.got); got != tc.diff {
				t.Errorf("LineDiff(%q, %q) =\n%q\nwant\n%q", tc.want, tc.got, got, tc.diff)
			}
		})
	}
}
