package keras

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/headroom-ml/headroom/internal/hdf5"
	"github.com/headroom-ml/headroom/tensor"
)

// h5py returns /usr/bin/python3 when it imports h5py, or skips the test
// (scripts/test.sh installs python3-h5py).
func h5py(t testing.TB) string {
	t.Helper()
	const py = "/usr/bin/python3"
	if out, err := exec.Command(py, "-c", "import h5py, numpy").CombinedOutput(); err != nil {
		t.Skipf("no h5py for %s (apt-get install python3-h5py): %v %s", py, err, bytes.TrimSpace(out))
	}
	return py
}

type fileManifest struct {
	Params  int                  `json:"params"`
	Weights map[string][]float64 `json:"weights"`
}

// makeKerasFiles writes testdata/make_keras_files.py's files into a
// temporary folder.
func makeKerasFiles(t *testing.T) (string, map[string]json.RawMessage) {
	t.Helper()
	py := h5py(t)
	dir := t.TempDir()
	if out, err := exec.Command(py, filepath.Join("testdata", "make_keras_files.py"), dir).CombinedOutput(); err != nil {
		t.Fatalf("make_keras_files.py: %v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return dir, m
}

// Files written with h5py in Keras' layouts (Keras 2's weight_names,
// Keras 3 writing .h5, Keras 3's .keras, every dataset chunked and
// deflated, float16 and bfloat16 weights, weights alone with their
// config) give the exact parameter count and load every weight exactly.
func TestKerasFilesH5py(t *testing.T) {
	dir, manifest := makeKerasFiles(t)
	for _, c := range []struct{ file, config, format string }{
		{"k2_full.h5", "", "h5"},
		{"k3_legacy.h5", "", "h5"},
		{"k2_weights.h5", "k2_config.json", "weights.h5"},
		{"k3.keras", "", "keras"},
		{"k3_chunked.keras", "", "keras"},
		{"k3_fp16.keras", "", "keras"},
		{"k3_bf16.keras", "", "keras"},
	} {
		t.Run(c.file, func(t *testing.T) {
			var want fileManifest
			if err := json.Unmarshal(manifest[c.file], &want); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, c.file)
			var m *Model
			var err error
			if c.config != "" {
				m, err = LoadWithConfig(path, filepath.Join(dir, c.config))
			} else {
				m, err = Load(path)
			}
			if err != nil {
				t.Fatal(err)
			}
			if m.Params != want.Params || m.File.Format != c.format {
				t.Errorf("params %d, format %s: want %d, %s", m.Params, m.File.Format, want.Params, c.format)
			}
			if n, err := m.File.ParamCount(); err != nil || n != int64(want.Params) {
				t.Errorf("the file holds %d values (%v), want %d: optimizer and metrics state is not counted", n, err, want.Params)
			}
			ws, err := ReadFileWeights(m)
			if err != nil {
				t.Fatal(err)
			}
			if len(ws) != len(want.Weights) {
				t.Errorf("%d weights, want %d", len(ws), len(want.Weights))
			}
			for name, vals := range want.Weights {
				got, ok := ws[name]
				if !ok {
					t.Errorf("no weight %s", name)
					continue
				}
				for i, v := range got.Float32s() {
					if v != float32(vals[i]) {
						t.Errorf("%s[%d]: got %v, want %v", name, i, v, vals[i])
						break
					}
				}
			}
		})
	}
}

// A .keras name on an HDF5 file, and an .h5 name on a zip, are read by
// content; pickles and Git LFS pointers are named.
func TestKerasFileSniff(t *testing.T) {
	dir, _ := makeKerasFiles(t)
	for _, c := range []struct{ from, to, format string }{
		{"k2_full.h5", "model.keras", "h5"},
		{"k3.keras", "model.h5", "keras"},
	} {
		b, err := os.ReadFile(filepath.Join(dir, c.from))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(t.TempDir(), c.to)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		m, err := Load(p)
		if err != nil || m.File.Format != c.format || m.Params != 73 {
			t.Errorf("%s named %s: %v", c.from, c.to, err)
		}
	}
	for name, data := range map[string][]byte{
		"pickle.keras": {0x80, 0x04, 0x95, 1, 2},
		"lfs.keras":    []byte("version https://git-lfs.github.com/spec/v1\noid sha256:ab\nsize 12\n"),
	} {
		p := filepath.Join(t.TempDir(), name)
		os.WriteFile(p, data, 0o644)
		_, err := Load(p)
		if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), map[bool]string{true: "pickle", false: "Git LFS"}[name == "pickle.keras"]) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// Malformed files end in errors naming the file and, inside HDF5, the
// byte offset.
func TestKerasFileMalformed(t *testing.T) {
	dir, _ := makeKerasFiles(t)
	full, err := os.ReadFile(filepath.Join(dir, "k2_full.h5"))
	if err != nil {
		t.Fatal(err)
	}
	archive, err := os.ReadFile(filepath.Join(dir, "k3.keras"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		data   []byte
		offset bool // the error gives a byte offset
	}{
		{"truncated.h5", full[:len(full)/3], true},
		{"header_only.h5", full[:40], true},
		{"truncated.keras", archive[:len(archive)/2], false},
		{"garbage.keras", append([]byte("PK\x03\x04"), bytes.Repeat([]byte{0xff}, 64)...), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), c.name)
			os.WriteFile(p, c.data, 0o644)
			m, err := Load(p)
			if err == nil {
				_, err = ReadFileWeights(m)
			}
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), p) {
				t.Errorf("the error does not name the file: %v", err)
			}
			var fe *hdf5.FormatError
			if c.offset && (!errors.As(err, &fe) || !strings.Contains(err.Error(), "at byte")) {
				t.Errorf("the error does not give the offset: %v", err)
			}
		})
	}
}

// FuzzParseFile: a Keras file of any format, malformed, is an error,
// never a panic; what parses maps and loads its weights without one.
func FuzzParseFile(f *testing.F) {
	w := hdf5.NewWriter()
	v := w.Root().Group("layers/dense/vars")
	v.Dataset("0", "float32", []int64{2, 1}, make([]byte, 8))
	v.Dataset("1", "float32", []int64{1}, make([]byte, 4))
	h5, _ := w.Bytes()
	config := `{"module": "keras", "class_name": "Sequential", "config": {"name": "s", "layers": [
		{"class_name": "InputLayer", "config": {"batch_shape": [null, 2], "name": "in"}},
		{"class_name": "Dense", "config": {"name": "dense", "units": 1}}]}}`
	var zbuf bytes.Buffer
	zw := newZip(&zbuf)
	zw.add("config.json", []byte(config))
	zw.add("model.weights.h5", h5)
	zw.close()
	f.Add(zbuf.Bytes())
	f.Add(h5)
	f.Add([]byte(config))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := ParseFile(data, "fuzz.keras")
		if err != nil {
			return
		}
		file.ParamCount()
		m, err := file.Model()
		if err != nil || !file.HasWeights() {
			return
		}
		ReadFileWeights(m)
	})
}

// The weights of a model written by WriteArchive read back the same.
func TestWriteArchiveRoundTrip(t *testing.T) {
	dir, _ := makeKerasFiles(t)
	for _, name := range []string{"k3.keras", "k2_full.h5"} {
		m, err := Load(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		ws, err := ReadFileWeights(m)
		if err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(t.TempDir(), "out.keras")
		err = WriteArchive(out, m.NN(), m, func(n string) (tensor.Tensor, bool) { w, ok := ws[n]; return w, ok })
		if err != nil {
			t.Fatal(err)
		}
		back, err := Load(out)
		if err != nil {
			t.Fatal(err)
		}
		ws2, err := ReadFileWeights(back)
		if err != nil {
			t.Fatal(err)
		}
		if back.Params != m.Params || len(ws2) != len(ws) {
			t.Errorf("%s: read back %d params, %d weights; want %d, %d", name, back.Params, len(ws2), m.Params, len(ws))
		}
		for n, w := range ws {
			a, b := w.Float32s(), ws2[n].Float32s()
			for i := range a {
				if a[i] != b[i] {
					t.Fatalf("%s: %s[%d] %v, read back %v", name, n, i, a[i], b[i])
				}
			}
		}
	}
}

type zipWriter struct{ zw *zip.Writer }

func newZip(b *bytes.Buffer) *zipWriter { return &zipWriter{zip.NewWriter(b)} }

func (z *zipWriter) add(name string, data []byte) {
	w, _ := z.zw.Create(name)
	w.Write(data)
}

func (z *zipWriter) close() { z.zw.Close() }

// Layers under a 16-bit dtype policy (float16, bfloat16, mixed_*) are read
// as float32 layers: their weights are converted, precision is planned.
func TestSixteenBitPolicies(t *testing.T) {
	for _, p := range []string{`"float16"`, `"bfloat16"`, `{"class_name": "DTypePolicy", "config": {"name": "mixed_float16"}}`,
		`{"module": "keras", "class_name": "DTypePolicy", "config": {"name": "mixed_bfloat16"}}`} {
		conf := `{"class_name": "Sequential", "config": {"name": "s", "layers": [
			{"class_name": "InputLayer", "config": {"batch_shape": [null, 4], "name": "in"}},
			{"class_name": "Dense", "config": {"name": "d", "units": 2, "dtype": ` + p + `}}]}}`
		m, err := Parse([]byte(conf), "p.json")
		if err != nil || m.Params != 10 {
			t.Errorf("dtype %s: %v", p, err)
		}
	}
}
