package keras

import (
	"errors"

	"github.com/headroom-ml/headroom/nn"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParse: Parse never panics; an error is a *Error naming the file; a
// model's totals add up over its layers and agree with nn's count of its
// weights (trainable ones too); its summary and training config read
// without panics.
func FuzzParse(f *testing.F) {
	var paths []string
	shared := sharedDir(f)
	for _, pattern := range []string{filepath.Join("testdata", "*.json"), filepath.Join(shared, "*.json"),
		filepath.Join(filepath.Dir(shared), "keras-functional", "*.json")} {
		m, _ := filepath.Glob(pattern) // the shared configs are extra seeds when present
		paths = append(paths, m...)
	}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range []string{
		seq(input28, convValid(`, "padding": "same"`), layer("BatchNormalization", `"name": "bn", "axis": [3]`),
			layer("MaxPooling2D", `"name": "p", "pool_size": 2`), flat28, dense10),
		seq(layer("Embedding", `"name": "e", "input_dim": 50, "output_dim": 4, "input_length": 6`), layer("GlobalAveragePooling2D", `"name": "g"`)),
		`{"modelTopology": {"model_config": ` + seq(input28, flat28, dense10) + `}, "weightsManifest": [{"weights": [{"name": "dense/kernel", "shape": [784, 10]}]}]}`,
		`{"class_name": "Sequential", "config": [` + layer("Dense", `"name": "d", "units": 3, "input_dim": 4`) + `]}`,
		"PK\x03\x04", `[]`, `{}`, `null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Parse(data, "fuzz.json")
		if err != nil {
			var ke *Error
			if !errors.As(err, &ke) || !strings.Contains(err.Error(), "fuzz.json") {
				t.Fatalf("error %q (%T) does not name the file as a *keras.Error", err, err)
			}
			return
		}
		sum, trainable := 0, 0
		for _, l := range m.Layers {
			sum += l.Params
			trainable += l.TrainableParams
		}
		if sum != m.Params || trainable != m.TrainableParams || m.TrainableParams > m.Params {
			t.Fatalf("layers add up to %d (%d trainable), model says %d (%d)", sum, trainable, m.Params, m.TrainableParams)
		}
		total, trainable, err := nn.Params(m.NN())
		if err != nil || total != m.Params || trainable != m.TrainableParams {
			t.Fatalf("nn: %d params (%d trainable, %v), want %d (%d)", total, trainable, err, m.Params, m.TrainableParams)
		}
		if !strings.Contains(m.Summary(), "Total params: ") {
			t.Fatalf("summary without totals:\n%s", m.Summary())
		}
		if _, err := m.Training.NewOptimizer(); err != nil && !strings.Contains(err.Error(), "optimizer") {
			t.Fatalf("optimizer error %q does not say so", err)
		}
		if _, err := m.Training.StepLosses(); err != nil && !strings.Contains(err.Error(), "loss") {
			t.Fatalf("loss error %q does not name the loss", err)
		}
	})
}

// FuzzReadWeights: reading a TensorFlow.js manifest (against the shards
// of TestReadWeights' model) never panics, and weights read are one per
// variable of the model, each of the variable's shape.
func FuzzReadWeights(f *testing.F) {
	good := writeModel(f, goodWeights(), 10)
	dir := filepath.Dir(good)
	m, err := Load(good)
	if err != nil {
		f.Fatal(err)
	}
	declared, err := weightShapes(m.NN())
	if err != nil {
		f.Fatal(err)
	}
	data, err := os.ReadFile(good)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add([]byte(`{"weightsManifest": [{"paths": ["g1-a.bin"], "weights": [{"name": "d1/bias", "shape": [2], "dtype": "float32", "quantization": {"dtype": "uint16", "min": 0, "scale": 1}}]}]}`))
	f.Add([]byte(`{"weightsManifest": [{"paths": ["../x"], "weights": []}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ws, err := readWeights(data, dir, m)
		if err != nil {
			return
		}
		if len(ws) != len(declared) {
			t.Fatalf("got %d weights, the model has %d variables", len(ws), len(declared))
		}
		for name, w := range ws {
			if s, ok := declared[name]; !ok || !s.Equal(w.Shape()) {
				t.Fatalf("weight %s %v: the model's variable is %v", name, w.Shape(), s)
			}
		}
	})
}
