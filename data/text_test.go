package data

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// textTree writes a small folder of text files and returns its root:
//
//	a.b/y.txt "ABY"   a/testdata/t.txt "T"   a/z.txt "AZ"   b.txt "B"
//	link.txt -> b.txt   dirlink -> a (not followed)
//	.dot.txt "D"   .hidden/h.txt "H"
//
// A walk visits a/ before a.b/; sorted paths put a.b/y.txt first.
func textTree(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for rel, body := range map[string]string{
		"a.b/y.txt": "ABY", "a/testdata/t.txt": "T", "a/z.txt": "AZ", "b.txt": "B",
		".dot.txt": "D", ".hidden/h.txt": "H",
	} {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("b.txt", filepath.Join(root, "link.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a", filepath.Join(root, "dirlink")); err != nil {
		t.Fatal(err)
	}
	return root
}

func TestReadTextFolder(t *testing.T) {
	root := textTree(t)
	noTestdata := func(rel string, dir bool) bool { return !dir || path.Base(rel) != "testdata" }
	underA := func(rel string, dir bool) bool { return dir || strings.HasPrefix(rel, "a/") }
	for _, tc := range []struct {
		name string
		opt  TextOptions
		rels []string
		want string
	}{
		{"default", TextOptions{},
			[]string{"a.b/y.txt", "a/testdata/t.txt", "a/z.txt", "b.txt", "link.txt"}, "ABYTAZBB"},
		{"separator", TextOptions{Separator: true},
			[]string{"a.b/y.txt", "a/testdata/t.txt", "a/z.txt", "b.txt", "link.txt"}, "ABY\nT\nAZ\nB\nB\n"},
		{"hidden", TextOptions{Separator: true, Hidden: true},
			[]string{".dot.txt", ".hidden/h.txt", "a.b/y.txt", "a/testdata/t.txt", "a/z.txt", "b.txt", "link.txt"},
			"D\nH\nABY\nT\nAZ\nB\nB\n"},
		{"skip testdata", TextOptions{Keep: noTestdata},
			[]string{"a.b/y.txt", "a/z.txt", "b.txt", "link.txt"}, "ABYAZBB"},
		{"keep files under a", TextOptions{Keep: underA},
			[]string{"a/testdata/t.txt", "a/z.txt"}, "TAZ"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files, err := TextFiles(root, tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			var rels []string
			for _, f := range files {
				rels = append(rels, f.Rel)
				if want := filepath.Join(root, filepath.FromSlash(f.Rel)); f.Path != want {
					t.Errorf("got Path %q, want %q", f.Path, want)
				}
				if fi, err := os.Stat(f.Path); err != nil {
					t.Error(err)
				} else if fi.Size() != f.Size {
					t.Errorf("%s: got Size %d, want %d", f.Rel, f.Size, fi.Size())
				}
			}
			if !slices.Equal(rels, tc.rels) {
				t.Errorf("got files %q, want %q", rels, tc.rels)
			}
			got, err := ReadText(root, tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("got text %q, want %q", got, tc.want)
			}
		})
	}
}

func TestReadTextFile(t *testing.T) {
	root := textTree(t)
	for _, tc := range []struct {
		file string
		opt  TextOptions
		want string
	}{
		{"a/z.txt", TextOptions{}, "AZ"},
		{"a/z.txt", TextOptions{Separator: true}, "AZ\n"},
		{".dot.txt", TextOptions{}, "D"}, // the root is read even if hidden
		{"link.txt", TextOptions{Separator: true, Keep: func(string, bool) bool { return false }}, "B\n"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			got, err := ReadText(filepath.Join(root, tc.file), tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestReadTextMaxBytes(t *testing.T) {
	root := textTree(t)
	// With separators the text is "ABY\nT\nAZ\nB\nB\n", 13 bytes.
	for _, tc := range []struct {
		max    int64
		file   string // "" for no error
		offset int64
	}{
		{0, "", 0},
		{13, "", 0},
		{12, "link.txt", 1}, // link.txt starts at 11: its separator passes
		{5, "a/testdata/t.txt", 1},
		{4, "a/testdata/t.txt", 0},
		{2, "a.b/y.txt", 2},
	} {
		t.Run(fmt.Sprintf("MaxBytes=%d", tc.max), func(t *testing.T) {
			got, err := ReadText(root, TextOptions{Separator: true, MaxBytes: tc.max})
			if tc.file == "" {
				if err != nil || len(got) != 13 {
					t.Fatalf("got %q, %v, want 13 bytes and no error", got, err)
				}
				return
			}
			fe := wantFormatError(t, err, filepath.Join(root, filepath.FromSlash(tc.file)))
			if fe.Offset != tc.offset || fe.Format != "text" {
				t.Errorf("got %s at byte %d, want text at byte %d", fe.Format, fe.Offset, tc.offset)
			}
			if !errors.Is(err, ErrTextTooLarge) {
				t.Errorf("got %v, want an error wrapping ErrTextTooLarge", err)
			}
		})
	}
}

// TestAppendFile reads past the buffer's capacity (a file larger than
// listed) and stops one byte past the limit.
func TestAppendFile(t *testing.T) {
	p := writeFile(t, "f", []byte(strings.Repeat("x", 1000)))
	for _, tc := range []struct {
		name       string
		have, max  int
		capacity   int
		wantLength int
	}{
		{"no limit, small buffer", 3, 0, 4, 1003},
		{"exact capacity", 0, 0, 1000, 1000},
		{"limit", 3, 500, 4, 501},
	} {
		t.Run(tc.name, func(t *testing.T) {
			buf := append(make([]byte, 0, tc.capacity), strings.Repeat("y", tc.have)...)
			got, err := appendFile(buf, p, int64(tc.max))
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tc.wantLength || string(got[:tc.have]) != strings.Repeat("y", tc.have) || strings.Trim(string(got[tc.have:]), "x") != "" {
				t.Errorf("got %d bytes, want %d: the %d bytes held, then the file's", len(got), tc.wantLength, tc.have)
			}
		})
	}
}

func TestReadTextErrors(t *testing.T) {
	root := textTree(t)
	broken := filepath.Join(root, "a", "broken.txt")
	if err := os.Symlink("nowhere", broken); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(root, "missing")
	for _, tc := range []struct {
		name, path, want string
	}{
		{"broken link in a folder", root, broken},
		{"missing root", missing, missing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadText(tc.path, TextOptions{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error naming %s", err, tc.want)
			}
			if !errors.Is(err, os.ErrNotExist) {
				t.Errorf("got %v, want it to wrap os.ErrNotExist", err)
			}
		})
	}
}

// tokens returns the bytes of a token row as a string.
func tokens(xs []int32) string {
	b := make([]byte, len(xs))
	for i, x := range xs {
		b[i] = byte(x)
	}
	return string(b)
}

func TestWindowsConsecutive(t *testing.T) {
	w, err := NewWindows([]byte("hello, world"), 4)
	if err != nil {
		t.Fatal(err)
	}
	if got := w.NonOverlapping(); got != 2 {
		t.Fatalf("got %d non-overlapping windows, want 2 (offsets 0 and 4; 8 needs 13 bytes)", got)
	}
	for _, tc := range []struct {
		name   string
		b      int
		first  int
		wantX  []string
		wantY  []string
		wantOK bool
	}{
		{"both", 2, 0, []string{"hell", "o, w"}, []string{"ello", ", wo"}, true},
		{"second", 1, 1, []string{"o, w"}, []string{", wo"}, true},
		{"past the end", 2, 1, nil, nil, false},
		{"negative", 1, -1, nil, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x, y := make([]int32, tc.b*4), make([]int32, tc.b*4)
			err := w.Consecutive(x, y, tc.first)
			if (err == nil) != tc.wantOK {
				t.Fatalf("got error %v, want ok %v", err, tc.wantOK)
			}
			for b := range tc.wantX {
				if gx, gy := tokens(x[b*4:(b+1)*4]), tokens(y[b*4:(b+1)*4]); gx != tc.wantX[b] || gy != tc.wantY[b] {
					t.Errorf("window %d: got x %q y %q, want x %q y %q", b, gx, gy, tc.wantX[b], tc.wantY[b])
				}
			}
		})
	}
}

func TestWindowsRandom(t *testing.T) {
	const T, B = 4, 64
	text := []byte("abcdefghijkl") // distinct bytes: x[0] names the offset
	w, err := NewWindows(text, T)
	if err != nil {
		t.Fatal(err)
	}
	n := len(text) - T - 1 // offsets in [0, 7)
	seen := make([]bool, n)
	x, y := make([]int32, B*T), make([]int32, B*T)
	offs := make([]int, B)
	for step := uint64(0); step < 20; step++ {
		if err := w.Random(x, y, 42, step); err != nil {
			t.Fatal(err)
		}
		if _, err := w.RandomOffsets(offs, 42, step); err != nil {
			t.Fatal(err)
		}
		// the documented generator: the b-th draw of PCG(seed, step)
		rng := rand.New(rand.NewPCG(42, step))
		for b := range B {
			o := int(x[b*T] - 'a')
			if o < 0 || o >= n {
				t.Fatalf("step %d window %d: got offset %d, want one in [0, %d)", step, b, o, n)
			}
			seen[o] = true
			if gx, gy := tokens(x[b*T:(b+1)*T]), tokens(y[b*T:(b+1)*T]); gx != string(text[o:o+T]) || gy != string(text[o+1:o+T+1]) {
				t.Fatalf("step %d window %d: got x %q y %q, want x %q y %q", step, b, gx, gy, text[o:o+T], text[o+1:o+T+1])
			}
			if want := rng.IntN(n); offs[b] != o || o != want {
				t.Fatalf("step %d window %d: got offset %d (RandomOffsets %d), want %d", step, b, o, offs[b], want)
			}
		}
	}
	for o, ok := range seen {
		if !ok {
			t.Errorf("offset %d never drawn in 20 batches of 64, want every offset in [0, %d)", o, n)
		}
	}
}

func TestWindowsRandomDeterministic(t *testing.T) {
	text := []byte(strings.Repeat("the quick brown fox jumps over the lazy dog. ", 40))
	w, err := NewWindows(text, 16)
	if err != nil {
		t.Fatal(err)
	}
	draw := func(seed, step uint64, b int) []int {
		offs, err := w.RandomOffsets(make([]int, b), seed, step)
		if err != nil {
			t.Fatal(err)
		}
		return offs
	}
	first := draw(1, 7, 32)
	draw(1, 8, 32) // another step in between changes nothing
	for _, tc := range []struct {
		name       string
		seed, step uint64
		b          int
		same       bool
	}{
		{"same seed and step", 1, 7, 32, true},
		{"smaller batch is a prefix", 1, 7, 5, true},
		{"next step", 1, 8, 32, false},
		{"other seed", 2, 7, 32, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := draw(tc.seed, tc.step, tc.b)
			if eq := slices.Equal(got, first[:tc.b]); eq != tc.same {
				t.Errorf("got %v, want equal to %v: %v", got, first[:tc.b], tc.same)
			}
		})
	}
}

func TestWindowsErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func() error
	}{
		{"T zero", func() error { _, err := NewWindows([]byte("abc"), 0); return err }},
		{"no window", func() error { _, err := NewWindows([]byte("abc"), 3); return err }},
		{"random needs T+2 bytes", func() error {
			w, err := NewWindows([]byte("abc"), 2)
			if err != nil {
				return nil
			}
			return w.Random(make([]int32, 2), make([]int32, 2), 0, 0)
		}},
		{"x and y differ", func() error {
			w, _ := NewWindows([]byte("abcdef"), 2)
			return w.Random(make([]int32, 2), make([]int32, 4), 0, 0)
		}},
		{"not a multiple of T", func() error {
			w, _ := NewWindows([]byte("abcdef"), 2)
			return w.Consecutive(make([]int32, 3), make([]int32, 3), 0)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.run(); err == nil || !strings.HasPrefix(err.Error(), "data: ") {
				t.Errorf("got %v, want an error starting with \"data: \"", err)
			}
		})
	}
}

func TestWindowsAllocs(t *testing.T) {
	const B, T = 32, 128
	text := make([]byte, 10000)
	for i := range text {
		text[i] = byte(i * 7)
	}
	w, err := NewWindows(text, T)
	if err != nil {
		t.Fatal(err)
	}
	x, y := make([]int32, B*T), make([]int32, B*T)
	step := uint64(0)
	for _, tc := range []struct {
		name string
		fill func() error
	}{
		{"Random", func() error { step++; return w.Random(x, y, 3, step) }},
		{"Consecutive", func() error { return w.Consecutive(x, y, 0) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if got := testing.AllocsPerRun(100, func() { err = tc.fill() }); got != 0 || err != nil {
				t.Errorf("got %v allocations a batch (error %v), want 0", got, err)
			}
		})
	}
}

// FuzzWindows checks, for any text, T, batch and (seed, step), that every
// window Random and Consecutive fill is the text at an offset in range.
func FuzzWindows(f *testing.F) {
	f.Add([]byte("hello, world"), uint8(4), uint8(3), uint64(1), uint64(2))
	f.Add([]byte("ab"), uint8(1), uint8(1), uint64(0), uint64(0))
	f.Fuzz(func(t *testing.T, text []byte, tt, bb uint8, seed, step uint64) {
		T, B := int(tt), int(bb)
		w, err := NewWindows(text, T)
		if (err == nil) != (T >= 1 && len(text) >= T+1) {
			t.Fatalf("T %d, %d bytes: got error %v", T, len(text), err)
		}
		if err != nil {
			return
		}
		x, y := make([]int32, B*T), make([]int32, B*T)
		check := func(b, o int) {
			if gx, gy := tokens(x[b*T:(b+1)*T]), tokens(y[b*T:(b+1)*T]); gx != string(text[o:o+T]) || gy != string(text[o+1:o+T+1]) {
				t.Fatalf("window %d at %d: got x %q y %q, want %q %q", b, o, gx, gy, text[o:o+T], text[o+1:o+T+1])
			}
		}
		offs, err := w.RandomOffsets(make([]int, B), seed, step)
		if rerr := w.Random(x, y, seed, step); (err == nil) != (len(text) >= T+2) || (rerr == nil) != (err == nil) {
			t.Fatalf("T %d, %d bytes: got errors %v and %v", T, len(text), err, rerr)
		}
		if err == nil {
			for b, o := range offs {
				if o < 0 || o >= len(text)-T-1 {
					t.Fatalf("got offset %d, want one in [0, %d)", o, len(text)-T-1)
				}
				check(b, o)
			}
		}
		n := w.NonOverlapping()
		if err := w.Consecutive(x, y, 0); (err == nil) != (B <= n) {
			t.Fatalf("%d windows of %d: got %v", B, n, err)
		} else if err == nil {
			for b := range B {
				check(b, b*T)
			}
		}
	})
}

func benchmarkRandomWindows(b *testing.B, batch, T int) {
	text := make([]byte, 1<<20)
	w, err := NewWindows(text, T)
	if err != nil {
		b.Fatal(err)
	}
	x, y := make([]int32, batch*T), make([]int32, batch*T)
	b.SetBytes(int64(batch * T))
	for i := 0; b.Loop(); i++ {
		if err := w.Random(x, y, 1, uint64(i)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRandomWindows(b *testing.B) {
	b.Run("32x128", func(b *testing.B) { benchmarkRandomWindows(b, 32, 128) })
}
