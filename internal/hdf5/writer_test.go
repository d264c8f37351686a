package hdf5

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

func float32Bytes(v []float32) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

// sample writes a file in Keras 3's model.weights.h5 layout.
func sample(t *testing.T) ([]byte, []float32) {
	t.Helper()
	w := NewWriter()
	kernel := make([]float32, 6*4)
	for i := range kernel {
		kernel[i] = float32(math.Sin(float64(i))) * 3
	}
	v := w.Root().Group("layers/dense/vars")
	v.SetAttr("name", "dense")
	if err := v.Dataset("0", "float32", []int64{6, 4}, float32Bytes(kernel)); err != nil {
		t.Fatal(err)
	}
	if err := v.Dataset("1", "float64", []int64{2}, binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, math.Float64bits(0.5)), math.Float64bits(-1))); err != nil {
		t.Fatal(err)
	}
	if err := v.Dataset("2", "float16", []int64{3}, []byte{0, 0x3c, 0, 0xc0, 0xff, 0x7b}); err != nil {
		t.Fatal(err)
	}
	if err := v.Dataset("3", "int64", nil, binary.LittleEndian.AppendUint64(nil, 7)); err != nil {
		t.Fatal(err)
	}
	if err := v.Dataset("4", "float32", []int64{0, 3}, nil); err != nil {
		t.Fatal(err)
	}
	w.Root().Group("vars")
	w.Root().SetAttr("names", []string{"a", "bcd"})
	w.Root().SetAttr("pi", 3.5)
	w.Root().SetAttr("n", int64(-3))
	many := w.Root().Group("many")
	for _, n := range []string{"x", "y", "z", "w", "v", "u", "t", "s", "r", "q", "p"} {
		many.Group(n)
	}
	b, err := w.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	return b, kernel
}

// What Writer writes reads back with this package's reader.
func TestWriterRoundTrip(t *testing.T) {
	b, kernel := sample(t)
	f, err := Parse(b, "written.h5")
	if err != nil {
		t.Fatal(err)
	}
	root, err := f.Root()
	if err != nil {
		t.Fatal(err)
	}
	d, err := root.Dataset("layers/dense/vars/0")
	if err != nil {
		t.Fatal(err)
	}
	got, err := d.Float32s()
	if err != nil {
		t.Fatal(err)
	}
	for i := range kernel {
		if got[i] != kernel[i] {
			t.Fatalf("kernel[%d]: got %v, want %v", i, got[i], kernel[i])
		}
	}
	h, err := root.Dataset("layers/dense/vars/2")
	if err != nil {
		t.Fatal(err)
	}
	if v, err := h.Float32s(); err != nil || v[0] != 1 || v[1] != -2 || v[2] != 65504 || h.DType != "float16" {
		t.Errorf("float16: %v %v %s", v, err, h.DType)
	}
	g, err := root.Group("layers/dense/vars")
	if err != nil {
		t.Fatal(err)
	}
	if a, err := g.Attr("name"); err != nil || a == nil {
		t.Fatalf("name attribute: %v", err)
	} else if v, _ := a.Value(); v != "dense" {
		t.Errorf("name attribute %v, want dense", v)
	}
	if a, _ := root.Attr("names"); a == nil {
		t.Error("no names attribute")
	} else if v, _ := a.Strings(); len(v) != 2 || v[0] != "a" || v[1] != "bcd" {
		t.Errorf("names %q", v)
	}
	links, err := root.Group("many")
	if err != nil {
		t.Fatal(err)
	}
	if ls, err := links.Links(); err != nil || len(ls) != 11 {
		t.Errorf("many: %d links, %v", len(ls), err)
	}
}

// h5py opens what Writer writes, with the same values.
func TestWriterH5py(t *testing.T) {
	py := H5py(t)
	b, kernel := sample(t)
	path := filepath.Join(t.TempDir(), "w.h5")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	script := `
import h5py, json, sys, numpy as np
f = h5py.File(sys.argv[1], "r")
v = f["layers/dense/vars"]
out = {"kernel": v["0"][()].ravel().tolist(), "shape": list(v["0"].shape), "dtype": str(v["0"].dtype),
       "f64": v["1"][()].tolist(), "f16": v["2"][()].astype(float).tolist(), "f16dtype": str(v["2"].dtype),
       "i64": int(v["3"][()]), "empty": list(v["4"].shape),
       "name": v.attrs["name"].decode() if isinstance(v.attrs["name"], bytes) else v.attrs["name"],
       "names": [x.decode() for x in f.attrs["names"]], "pi": float(f.attrs["pi"]), "n": int(f.attrs["n"]),
       "many": sorted(f["many"].keys()), "top": sorted(f.keys())}
print(json.dumps(out))
`
	out, err := exec.Command(py, "-c", script, path).CombinedOutput()
	if err != nil {
		t.Fatalf("h5py cannot read the file: %v\n%s", err, out)
	}
	var got struct {
		Kernel   []float64
		Shape    []int
		DType    string
		F64      []float64
		F16      []float64
		F16DType string
		I64      int
		Empty    []int
		Name     string
		Names    []string
		Pi       float64
		N        int
		Many     []string
		Top      []string
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for i, v := range kernel {
		if float32(got.Kernel[i]) != v {
			t.Fatalf("kernel[%d]: h5py reads %v, want %v", i, got.Kernel[i], v)
		}
	}
	if got.DType != "float32" || len(got.Shape) != 2 || got.Shape[0] != 6 || got.F16DType != "float16" || got.F16[2] != 65504 ||
		got.F64[1] != -1 || got.I64 != 7 || len(got.Empty) != 2 || got.Name != "dense" || len(got.Names) != 2 || got.Names[1] != "bcd" ||
		got.Pi != 3.5 || got.N != -3 || len(got.Many) != 11 || len(got.Top) != 3 {
		t.Errorf("h5py reads %s", out)
	}
}
