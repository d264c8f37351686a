package hdf5

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// H5py returns /usr/bin/python3 when it imports h5py, or skips the test
// saying how to get it (scripts/test.sh installs python3-h5py).
func H5py(t testing.TB) string {
	t.Helper()
	const py = "/usr/bin/python3"
	if out, err := exec.Command(py, "-c", "import h5py, numpy").CombinedOutput(); err != nil {
		t.Skipf("no h5py for %s (apt-get install python3-h5py): %v %s", py, err, bytes.TrimSpace(out))
	}
	return py
}

type manifestEntry struct {
	Datasets map[string]struct {
		DType  string    `json:"dtype"`
		Shape  []int64   `json:"shape"`
		Values []float64 `json:"values"`
	} `json:"datasets"`
	Attrs map[string]any `json:"attrs"`
}

// makeH5py writes testdata/make_h5.py's files into a temporary folder and
// returns it with the manifest of what each file holds.
func makeH5py(t *testing.T) (string, map[string]manifestEntry) {
	t.Helper()
	py := H5py(t)
	dir := t.TempDir()
	if out, err := exec.Command(py, filepath.Join("testdata", "make_h5.py"), dir).CombinedOutput(); err != nil {
		t.Fatalf("make_h5.py: %v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]manifestEntry
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return dir, m
}

// Every dataset and attribute h5py wrote, in every layout, reads back
// with h5py's dtype, shape and values.
func TestReadH5py(t *testing.T) {
	dir, manifest := makeH5py(t)
	names := make([]string, 0, len(manifest))
	for n := range manifest {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) < 6 {
		t.Fatalf("make_h5.py wrote %d files", len(names))
	}
	for _, name := range names {
		want := manifest[name]
		t.Run(name, func(t *testing.T) {
			f, err := Open(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			root, err := f.Root()
			if err != nil {
				t.Fatal(err)
			}
			seen := map[string]bool{}
			err = root.Walk(func(d *Dataset) error {
				seen[d.Path()] = true
				w, ok := want.Datasets[d.Path()]
				if !ok {
					return fmt.Errorf("dataset %s is not in the manifest", d.Path())
				}
				if string(d.DType) != w.DType {
					t.Errorf("%s: dtype %s, want %s", d.Path(), d.DType, w.DType)
				}
				if fmt.Sprint(d.Shape) != fmt.Sprint(w.Shape) && !(len(d.Shape) == 0 && len(w.Shape) == 0) {
					t.Errorf("%s: shape %v, want %v", d.Path(), d.Shape, w.Shape)
				}
				got, err := d.Float32s()
				if err != nil {
					return err
				}
				if len(got) != len(w.Values) {
					t.Errorf("%s: %d values, want %d", d.Path(), len(got), len(w.Values))
					return nil
				}
				for i, v := range got {
					if float64(v) != float64(float32(w.Values[i])) {
						t.Errorf("%s[%d]: got %v, want %v", d.Path(), i, v, w.Values[i])
						break
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(seen) != len(want.Datasets) {
				t.Errorf("read %d datasets, the manifest lists %d", len(seen), len(want.Datasets))
			}
			for key, wv := range want.Attrs {
				path, attr, _ := strings.Cut(key, "@")
				obj := &root.Object
				if path != "/" && path != "" {
					v, err := root.Get(path)
					if err != nil {
						t.Fatal(err)
					}
					switch o := v.(type) {
					case *Group:
						obj = &o.Object
					case *Dataset:
						obj = &o.Object
					}
				}
				a, err := obj.Attr(attr)
				if err != nil || a == nil {
					t.Errorf("%s: attribute %s: %v (missing: %v)", path, attr, err, a == nil)
					continue
				}
				gv, err := a.Value()
				if err != nil {
					t.Errorf("%s@%s: %v", path, attr, err)
					continue
				}
				if !sameValue(gv, wv) {
					t.Errorf("%s@%s: got %.200v, want %.200v", path, attr, gv, wv)
				}
			}
		})
	}
}

// sameValue compares a decoded attribute with the manifest's JSON value.
func sameValue(got, want any) bool {
	switch w := want.(type) {
	case string:
		return got == w
	case float64:
		switch g := got.(type) {
		case float64:
			return g == w
		case int64:
			return float64(g) == w
		}
	case []any:
		var gl []any
		switch g := got.(type) {
		case []string:
			for _, s := range g {
				gl = append(gl, s)
			}
		case []float64:
			for _, x := range g {
				gl = append(gl, x)
			}
		case []int64:
			for _, x := range g {
				gl = append(gl, float64(x))
			}
		default:
			return false
		}
		if len(gl) != len(w) {
			return false
		}
		for i := range w {
			if !sameValue(gl[i], w[i]) {
				return false
			}
		}
		return true
	}
	return false
}

func TestHalf(t *testing.T) {
	for _, c := range []struct {
		bits uint16
		want float32
	}{{0x3c00, 1}, {0xc000, -2}, {0x7bff, 65504}, {0x0001, 5.9604645e-08}, {0x8000, float32(math.Copysign(0, -1))}, {0x3555, 0.33325195}} {
		if got := half(c.bits); got != c.want {
			t.Errorf("half(%#04x) = %v, want %v", c.bits, got, c.want)
		}
	}
	if !math.IsInf(float64(half(0x7c00)), 1) || !math.IsNaN(float64(half(0x7e00))) {
		t.Errorf("half: infinity and NaN")
	}
}

// Malformed files (a loop in the groups, a size that lies, a dataset
// larger than the file, a truncated file, a heap larger than the file)
// end in a *FormatError naming the file and the byte offset.
func TestMalformed(t *testing.T) {
	dir, _ := makeH5py(t)
	for _, c := range []struct{ file, want string }{
		{"cycle.h5", "contains itself"},
		{"lying_size.h5", "contiguous storage of 4000 bytes for 1000000000 elements"},
		{"larger_than_file.h5", "runs past the end of the file"},
		{"truncated.h5", "past the end"},
		{"heap_size.h5", "past the end of the file"},
	} {
		t.Run(c.file, func(t *testing.T) {
			path := filepath.Join(dir, "bad", c.file)
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			f, err := Parse(data, path)
			if err == nil {
				var root *Group
				if root, err = f.Root(); err == nil {
					err = root.Walk(func(d *Dataset) error { _, err := d.Float32s(); return err })
				}
			}
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("got %v, want a *FormatError", err)
			}
			if fe.File != path || fe.Offset <= 0 || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "at byte") {
				t.Errorf("got %q (offset %d), want the file, an offset and %q", err, fe.Offset, c.want)
			}
		})
	}
}
