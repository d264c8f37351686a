package data

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/headroom-ml/headroom/tensor"
)

// An .npy file written row by row reads back (with this package's reader
// and by its header's rules: a multiple of 64 bytes, ending in a newline).
func TestNPYWriter(t *testing.T) {
	for _, rowShape := range []tensor.Shape{{3}, {}, {2, 2}} {
		path := filepath.Join(t.TempDir(), "out.npy")
		os.WriteFile(path, []byte("old"), 0o644)
		w, err := CreateNPY(path, tensor.Float32, rowShape)
		if err != nil {
			t.Fatal(err)
		}
		var want []float32
		for b := 0; b < 3; b++ {
			rows := tensor.New(tensor.Float32, append(tensor.Shape{b + 1}, rowShape...))
			for i := range rows.Float32s() {
				rows.Float32s()[i] = float32(len(want))
				want = append(want, float32(len(want)))
			}
			if err := w.Write(rows); err != nil {
				t.Fatal(err)
			}
		}
		if b, _ := os.ReadFile(path); string(b) != "old" {
			t.Errorf("the file changed before Close")
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(path)
		hlen := 10 + int(b[8]) + int(b[9])<<8
		if hlen%64 != 0 || b[hlen-1] != '\n' {
			t.Errorf("row shape %v: header of %d bytes ending in %q", rowShape, hlen, b[hlen-1])
		}
		var got []float32
		n := 0
		for s, err := range NPY(path, "").All(context.Background(), Config{}) {
			if err != nil {
				t.Fatal(err)
			}
			if !s.X.Shape().Equal(rowShape) {
				t.Fatalf("row shape %v, want %v", s.X.Shape(), rowShape)
			}
			got = append(got, s.X.Float32s()...)
			n++
		}
		if n != 6 || len(got) != len(want) {
			t.Fatalf("row shape %v: read %d rows, %d values; want 6 rows, %d values", rowShape, n, len(got), len(want))
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("value %d: got %v, want %v", i, got[i], want[i])
			}
		}
		if ents, _ := os.ReadDir(filepath.Dir(path)); len(ents) != 1 {
			t.Errorf("left %d files in the folder, want 1", len(ents))
		}
	}
}

// Abort leaves the file as it was and no temporary file beside it.
func TestNPYWriterAbort(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.npy")
	os.WriteFile(path, []byte("old"), 0o644)
	w, err := CreateNPY(path, tensor.Float32, tensor.Shape{2})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(tensor.New(tensor.Float32, tensor.Shape{3, 2})); err != nil {
		t.Fatal(err)
	}
	w.Abort()
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Errorf("after Abort: got %q, want \"old\"", b)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("after Abort: got %d files, want 1", len(ents))
	}
}
