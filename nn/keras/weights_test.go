package keras

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/headroom-ml/headroom/tensor"
)

// tfjsTopology is a small functional model as tfjs-layers 0.8 saved them
// (no model_config wrapper): in [3] -> d1 Dense 2 -> bn -> out Dense 1.
const tfjsTopology = `{"class_name": "Model", "keras_version": "tfjs-layers 0.8.0", "backend": "tensor_flow.js", "config": {"name": "m", "layers": [
	{"name": "in", "class_name": "InputLayer", "config": {"name": "in", "batch_input_shape": [null, 3], "dtype": "float32"}, "inbound_nodes": []},
	{"name": "d1", "class_name": "Dense", "config": {"name": "d1", "units": 2, "activation": "relu"}, "inbound_nodes": [[["in", 0, 0, {}]]]},
	{"name": "bn", "class_name": "BatchNormalization", "config": {"name": "bn", "axis": -1}, "inbound_nodes": [[["d1", 0, 0, {}]]]},
	{"name": "out", "class_name": "Dense", "config": {"name": "out", "units": 1}, "inbound_nodes": [[["bn", 0, 0, {}]]]}],
	"input_layers": [["in", 0, 0]], "output_layers": [["out", 0, 0]]}}`

// tfjsWeight is one weight of a test manifest and the values it stands for.
type tfjsWeight struct {
	name  string
	shape []int
	quant string    // "", uint8, uint16, float16
	min   float64   // for uint8/uint16
	scale float64   // for uint8/uint16
	raw   []float64 // float32/float16 values, or the integers q of a quantized one
	want  []float32
}

func (w tfjsWeight) encode() []byte {
	var b []byte
	for _, v := range w.raw {
		switch w.quant {
		case "":
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(float32(v)))
		case "float16":
			b = binary.LittleEndian.AppendUint16(b, uint16(tensor.ToFloat16(float32(v))))
		case "uint8":
			b = append(b, byte(v))
		case "uint16":
			b = binary.LittleEndian.AppendUint16(b, uint16(v))
		}
	}
	return b
}

func (w tfjsWeight) manifest() map[string]any {
	m := map[string]any{"name": w.name, "shape": w.shape, "dtype": "float32"}
	switch w.quant {
	case "uint8", "uint16":
		m["quantization"] = map[string]any{"dtype": w.quant, "min": w.min, "scale": w.scale, "original_dtype": "float32"}
	case "":
	default:
		m["quantization"] = map[string]any{"dtype": w.quant, "original_dtype": "float32"}
	}
	return m
}

// goodWeights are the model's weights: two groups, the first split over
// two shards in the middle of a weight, every encoding, names with and
// without the converter's model prefix.
func goodWeights() [][]tfjsWeight {
	return [][]tfjsWeight{{
		{name: "m/d1/kernel", shape: []int{3, 2}, raw: []float64{1, 2, 3, 4, 5, 6}, want: []float32{1, 2, 3, 4, 5, 6}},
		{name: "d1/bias", shape: []int{2}, quant: "uint8", min: -1, scale: 0.5, raw: []float64{0, 4}, want: []float32{-1, 1}},
		{name: "bn/gamma:0", shape: []int{2}, quant: "uint16", min: 0.25, scale: 0.25, raw: []float64{3, 1000}, want: []float32{1, 250.25}},
	}, {
		{name: "bn/beta", shape: []int{2}, quant: "float16", raw: []float64{0.5, -2}, want: []float32{0.5, -2}},
		{name: "bn/moving_mean", shape: []int{2}, raw: []float64{0.1, 0.2}, want: []float32{0.1, 0.2}},
		{name: "bn/moving_variance", shape: []int{2}, raw: []float64{1.5, 2.5}, want: []float32{1.5, 2.5}},
		{name: "out/kernel", shape: []int{2, 1}, raw: []float64{-1, 1}, want: []float32{-1, 1}},
		{name: "out/bias", shape: []int{1}, raw: []float64{0.75}, want: []float32{0.75}},
	}}
}

// writeModel writes model.json and its shards into a new directory and
// returns model.json's path. split cuts group 0's bytes into two shards.
func writeModel(t testing.TB, groups [][]tfjsWeight, split int) string {
	t.Helper()
	dir := t.TempDir()
	var manifest []any
	for gi, g := range groups {
		var data []byte
		var ws []any
		for _, w := range g {
			data = append(data, w.encode()...)
			ws = append(ws, w.manifest())
		}
		names := []string{"group" + string(rune('1'+gi)) + "-shard1of1.bin"}
		parts := [][]byte{data}
		if gi == 0 && split > 0 {
			names = []string{"g1-a.bin", "g1-b.bin"}
			parts = [][]byte{data[:split], data[split:]}
		}
		for i, n := range names {
			if err := os.WriteFile(filepath.Join(dir, n), parts[i], 0o644); err != nil {
				t.Fatal(err)
			}
		}
		manifest = append(manifest, map[string]any{"paths": names, "weights": ws})
	}
	mj, err := json.Marshal(manifest)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "model.json")
	body := `{"format": "layers-model", "modelTopology": ` + tfjsTopology + `, "weightsManifest": ` + string(mj) + `}`
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestReadWeights(t *testing.T) {
	groups := goodWeights()
	path := writeModel(t, groups, 10)
	m, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if m.Params != 6+2+8+2+1 {
		t.Fatalf("params: got %d, want 19", m.Params)
	}
	ws, err := ReadWeights(path, m)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]float32{}
	for _, g := range groups {
		for _, w := range g {
			name := strings.TrimSuffix(strings.TrimPrefix(w.name, "m/"), ":0")
			want[name] = w.want
		}
	}
	if len(ws) != len(want) {
		t.Errorf("got %d weights, want %d", len(ws), len(want))
	}
	for name, w := range want {
		got, ok := ws[name]
		if !ok {
			t.Errorf("no tfjsWeight %s", name)
			continue
		}
		for i, v := range got.Float32s() {
			if v != w[i] {
				t.Errorf("%s[%d]: got %v, want %v", name, i, v, w[i])
			}
		}
	}

	// LoadWeights hands each to the writer, in the order of their names
	var order []string
	got := map[string]tensor.Tensor{}
	if err := LoadWeights(path, m, func(name string, w tensor.Tensor) error {
		order = append(order, name)
		got[name] = w
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(ws) || !sort.StringsAreSorted(order) {
		t.Errorf("LoadWeights wrote %v, want the %d weights in name order", order, len(ws))
	}
	if g := got["bn/gamma"].Float32s(); g[0] != 1 || g[1] != 250.25 {
		t.Errorf("bn/gamma written: got %v, want [1 250.25]", g)
	}
	err = LoadWeights(path, m, func(name string, w tensor.Tensor) error { return fmt.Errorf("no variable %s", name) })
	if err == nil || !strings.Contains(err.Error(), "no variable") || !strings.Contains(err.Error(), path) {
		t.Errorf("a writer's error: got %v, want it with the file's name", err)
	}
}

func TestReadWeightsErrors(t *testing.T) {
	good, err := Load(writeModel(t, goodWeights(), 0))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		edit     func(g [][]tfjsWeight) [][]tfjsWeight
		shard    func(path string) // damages the files after writing
		contains string
	}{
		{"short shard", nil, func(path string) {
			p := filepath.Join(filepath.Dir(path), "group2-shard1of1.bin")
			b, _ := os.ReadFile(p)
			os.WriteFile(p, b[:len(b)-1], 0o644)
		}, "the shards hold 31 bytes, the manifest lists 32"},
		{"long shard", nil, func(path string) {
			p := filepath.Join(filepath.Dir(path), "group2-shard1of1.bin")
			b, _ := os.ReadFile(p)
			os.WriteFile(p, append(b, 0), 0o644)
		}, "the shards hold more than the 32 bytes"},
		{"missing shard", nil, func(path string) { os.Remove(filepath.Join(filepath.Dir(path), "group2-shard1of1.bin")) }, "no such file"},
		{"unknown weight", func(g [][]tfjsWeight) [][]tfjsWeight { g[1][4].name = "zzz/bias"; return g }, nil, "weight zzz/bias loads into no variable"},
		{"shape", func(g [][]tfjsWeight) [][]tfjsWeight { g[1][3].shape = []int{1, 2}; return g }, nil, "weight out/kernel has shape [1, 2], variable out/kernel [2, 1]"},
		{"missing", func(g [][]tfjsWeight) [][]tfjsWeight { g[1] = g[1][:4]; return g }, nil, "the manifest has no weight for out/bias"},
		{"twice", func(g [][]tfjsWeight) [][]tfjsWeight {
			g[1][4].name = "out/kernel"
			g[1][4].shape = []int{2, 1}
			g[1][4].raw = []float64{1, 2}
			return g
		}, nil,
			"weights out/kernel and out/kernel both load into out/kernel"},
		{"bad quantization", func(g [][]tfjsWeight) [][]tfjsWeight { g[0][1].quant = "int4"; return g }, nil, `quantization dtype "int4"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := goodWeights()
			if tc.edit != nil {
				g = tc.edit(g)
			}
			path := writeModel(t, g, 0)
			if tc.shard != nil {
				tc.shard(path)
			}
			_, err := ReadWeights(path, good)
			if err == nil || !strings.Contains(err.Error(), tc.contains) || !strings.Contains(err.Error(), path) {
				t.Errorf("got %v, want an error naming %s containing %q", err, path, tc.contains)
			}
		})
	}
	// a shard path that leaves the model's directory
	path := writeModel(t, goodWeights(), 0)
	b, _ := os.ReadFile(path)
	os.WriteFile(path, []byte(strings.Replace(string(b), `"group1-shard1of1.bin"`, `"../group1-shard1of1.bin"`, 1)), 0o644)
	if _, err := ReadWeights(path, good); err == nil || !strings.Contains(err.Error(), "is not a file name beside model.json") {
		t.Errorf("escaping path: got %v", err)
	}
}
