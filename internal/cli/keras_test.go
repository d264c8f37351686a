package cli_test

import (
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/headroom-ml/headroom/train/checkpoint"
)

// kerasPlan is the part of 'plan --json' a Keras model adds.
type kerasPlan struct {
	ParamCount         int    `json:"param_count"`
	OptStateBytes      int64  `json:"optstate_bytes"`
	ParamsBytes        int64  `json:"params_bytes"`
	TotalParams        *int   `json:"total_params"`
	TrainableParams    *int   `json:"trainable_params"`
	NonTrainableParams *int   `json:"non_trainable_params"`
	Optimizer          string `json:"optimizer"`
	KerasLayers        []struct {
		Name            string `json:"name"`
		Class           string `json:"class"`
		OutputShape     string `json:"output_shape"`
		Params          int    `json:"params"`
		TrainableParams int    `json:"trainable_params"`
	} `json:"keras_layers"`
}

func planKeras(t *testing.T, args ...string) kerasPlan {
	t.Helper()
	status, stdout, stderr := run(t, append([]string{"plan", "--json", "--batch", "1"}, args...)...)
	if status != 0 {
		t.Fatalf("plan %v: status %d: %s", args, status, stderr)
	}
	var p kerasPlan
	if err := json.Unmarshal([]byte(stdout), &p); err != nil {
		t.Fatalf("plan --json: %v:\n%s", err, stdout)
	}
	if p.TotalParams == nil || p.TrainableParams == nil || p.NonTrainableParams == nil {
		t.Fatalf("plan --json --keras lacks total, trainable or non-trainable params:\n%s", stdout)
	}
	return p
}

func kerasTestdata(name string) string {
	return filepath.Join("..", "..", "nn", "keras", "testdata", name)
}

// Acceptance 2 of issue 15: a functional Keras config with an Add and a
// Concatenate trains from the CLI on the digits, with the optimizer and
// loss of its training config, to a test accuracy of 0.95 or more, and
// the ledger's peak is the plan's.
func TestTrainKerasFunctional(t *testing.T) {
	status, stdout, stderr := run(t, "train", "--keras", kerasTestdata("digits_residual_k2.json"), "--threads", "2")
	if status != 0 {
		t.Fatalf("status %d: %s", status, stderr)
	}
	if !strings.Contains(stdout, "optimizer from "+kerasTestdata("digits_residual_k2.json")+": Adam(") {
		t.Errorf("the run does not say it uses the file's Adam:\n%s", stdout)
	}
	r := result(t, stdout)
	if r["model"] != "digits_residual_k2.json" {
		t.Errorf("model=%s, want digits_residual_k2.json", r["model"])
	}
	if acc := num(t, r, "test_acc"); acc < 0.95 {
		t.Errorf("test_acc %v, want >= 0.95", acc)
	}
	if planned, measured := integer(t, r, "planned_peak_bytes"), integer(t, r, "measured_peak_bytes"); planned != measured {
		t.Errorf("planned_peak_bytes %d != measured_peak_bytes %d", planned, measured)
	}
}

// plan --keras of a Keras 3 functional model with two inputs, two outputs
// (a loss each, weighted), a frozen nested model and a shared layer.
func TestPlanKerasFunctional(t *testing.T) {
	p := planKeras(t, "--keras", kerasTestdata("k3_two_towers.json"))
	if *p.TotalParams != 127 || *p.TrainableParams != 35 || *p.NonTrainableParams != 92 || p.ParamCount != 127 {
		t.Errorf("params: got total %d trainable %d non-trainable %d (param_count %d), want 127, 35, 92",
			*p.TotalParams, *p.TrainableParams, *p.NonTrainableParams, p.ParamCount)
	}
	if !strings.HasPrefix(p.Optimizer, "SGD(") || !strings.Contains(p.Optimizer, "momentum=0.9") {
		t.Errorf("optimizer %q, want the file's SGD with momentum 0.9", p.Optimizer)
	}
	// SGD with momentum keeps one slot per trainable weight: the two Dense
	// layers' four variables, 64-byte aligned; the frozen encoder none
	if p.OptStateBytes != 4*64 {
		t.Errorf("optstate_bytes %d, want 256 (momentum of 4 trainable variables)", p.OptStateBytes)
	}
	want := []string{"image InputLayer (None, 6, 6, 2) 0 0", "meta InputLayer (None, 4) 0 0", "encoder Functional (None, 4) 92 0",
		"shared Dense multiple 20 20", "dot Dot (None, 1) 0 0", "avg Average (None, 4) 0 0", "classes Dense (None, 3) 15 15"}
	var got []string
	for _, l := range p.KerasLayers {
		got = append(got, strings.Join([]string{l.Name, l.Class, l.OutputShape, itoa(l.Params), itoa(l.TrainableParams)}, " "))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("keras_layers:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// the text form prints Keras' summary and the optimizer
	status, text, stderr := run(t, "plan", "--keras", kerasTestdata("k3_two_towers.json"))
	if status != 0 || !strings.Contains(text, "Non-trainable params: 92") || !strings.Contains(text, "optimizer from ") {
		t.Errorf("plan text (status %d, %s) lacks the summary or the optimizer:\n%s", status, stderr, text)
	}
	// training needs one input
	status, _, stderr = run(t, "train", "--keras", kerasTestdata("k3_two_towers.json"))
	if status == 0 || !strings.Contains(stderr, "has 2 inputs: training feeds one") {
		t.Errorf("train of a two-input model: status %d, %s", status, stderr)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// The file's optimizer is used unless --optimizer is given; --lr alone
// keeps the file's optimizer.
func TestKerasOptimizerFlags(t *testing.T) {
	file := kerasTestdata("digits_residual_k2.json")
	adam := planKeras(t, "--keras", file)
	if !strings.HasPrefix(adam.Optimizer, "Adam(") || adam.OptStateBytes < 2*adam.ParamsBytes-1024 {
		t.Errorf("the file's Adam: optimizer %q, optstate %d for params %d", adam.Optimizer, adam.OptStateBytes, adam.ParamsBytes)
	}
	sgd := planKeras(t, "--keras", file, "--optimizer", "sgd")
	if sgd.Optimizer != "" || sgd.OptStateBytes != 0 {
		t.Errorf("--optimizer sgd: optimizer %q, optstate %d, want the flag's plain SGD (no state)", sgd.Optimizer, sgd.OptStateBytes)
	}
	lr := planKeras(t, "--keras", file, "--lr", "0.5")
	if !strings.HasPrefix(lr.Optimizer, "Adam(") || lr.OptStateBytes != adam.OptStateBytes {
		t.Errorf("--lr alone: optimizer %q, optstate %d, want the file's Adam", lr.Optimizer, lr.OptStateBytes)
	}
}

// --keras-weights starts training from a TensorFlow.js model's weights:
// with a learning rate of 0 the saved weights are the file's.
func TestKerasWeightsFlag(t *testing.T) {
	dir := t.TempDir()
	kernel := make([]float32, 64*10)
	for i := range kernel {
		kernel[i] = float32(math.Sin(float64(i)))
	}
	bias := []float32{0.5, -0.5, 1, -1, 2, -2, 0.25, -0.25, 3, -3}
	var data []byte
	for _, v := range append(append([]float32{}, kernel...), bias...) {
		data = binary.LittleEndian.AppendUint32(data, math.Float32bits(v))
	}
	if err := os.WriteFile(filepath.Join(dir, "group1-shard1of1.bin"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	model := `{"format": "layers-model", "modelTopology": {"keras_version": "2.15.0", "model_config": {"class_name": "Functional", "config": {"name": "lin", "layers": [
		{"name": "img", "class_name": "InputLayer", "config": {"name": "img", "batch_input_shape": [null, 8, 8, 1]}, "inbound_nodes": []},
		{"name": "flat", "class_name": "Flatten", "config": {"name": "flat"}, "inbound_nodes": [[["img", 0, 0, {}]]]},
		{"name": "probs", "class_name": "Dense", "config": {"name": "probs", "units": 10, "activation": "softmax"}, "inbound_nodes": [[["flat", 0, 0, {}]]]}],
		"input_layers": [["img", 0, 0]], "output_layers": [["probs", 0, 0]]}}},
		"weightsManifest": [{"paths": ["group1-shard1of1.bin"], "weights": [{"name": "probs/kernel", "shape": [64, 10], "dtype": "float32"}, {"name": "probs/bias", "shape": [10], "dtype": "float32"}]}]}`
	path := filepath.Join(dir, "model.json")
	if err := os.WriteFile(path, []byte(model), 0o644); err != nil {
		t.Fatal(err)
	}
	saved := filepath.Join(dir, "out.safetensors")
	status, stdout, stderr := run(t, "train", "--keras", path, "--keras-weights", "--lr", "0", "--epochs", "1", "--save", saved)
	if status != 0 {
		t.Fatalf("status %d: %s", status, stderr)
	}
	if !strings.Contains(stdout, "weights from "+path) {
		t.Errorf("the run does not say it loaded the weights:\n%s", stdout)
	}
	f, err := checkpoint.Load(saved)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string][]float32{"probs/kernel": kernel, "probs/bias": bias} {
		got, ok := f.Get(name)
		if !ok {
			t.Fatalf("the saved weights lack %s", name)
		}
		for i, v := range got.Float32s() {
			if v != want[i] {
				t.Fatalf("%s[%d]: got %v, want %v", name, i, v, want[i])
			}
		}
	}
	// and a test accuracy from those weights, not from a fresh start: the
	// same run without them differs
	r := result(t, stdout)
	status, stdout2, _ := run(t, "train", "--keras", path, "--lr", "0", "--epochs", "1")
	if status != 0 || result(t, stdout2)["test_acc"] == r["test_acc"] && result(t, stdout2)["first_loss"] == r["first_loss"] {
		t.Errorf("a run without --keras-weights starts from the same loss %s", r["first_loss"])
	}
}

// readTSV reads a tab-separated file with a header into maps by column.
func readTSV(t *testing.T, path string) []map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the shared Keras configs are needed (CI clones them beside the repo): %v", err)
	}
	var header []string
	var rows []map[string]string
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" {
			continue
		}
		cols := strings.Split(line, "\t")
		if header == nil {
			header = cols
			continue
		}
		row := map[string]string{}
		for i, h := range header {
			if i < len(cols) {
				row[h] = cols[i]
			}
		}
		rows = append(rows, row)
	}
	return rows
}

// Acceptance 1 of issue 15: plan --keras FILE --batch 1 --json reports
// Keras' exact total parameter count for every functional config in
// ../shared/keras-functional (EXPECTED.tsv), and the per-layer rows of
// LAYERS.tsv.
func TestPlanKerasSharedFunctional(t *testing.T) {
	dir := filepath.Join("..", "..", "..", "shared", "keras-functional")
	expected := readTSV(t, filepath.Join(dir, "EXPECTED.tsv"))
	layers := readTSV(t, filepath.Join(dir, "LAYERS.tsv"))
	if len(expected) != 6 {
		t.Fatalf("EXPECTED.tsv lists %d configs, want 6", len(expected))
	}
	for _, want := range expected {
		file := want["file"]
		t.Run(file, func(t *testing.T) {
			p := planKeras(t, "--keras", filepath.Join(dir, file))
			if got := itoa(*p.TotalParams); got != want["total_params"] {
				t.Errorf("total_params: got %s, want %s", got, want["total_params"])
			}
			if p.ParamCount != *p.TotalParams || *p.TrainableParams+*p.NonTrainableParams != *p.TotalParams {
				t.Errorf("param_count %d, trainable %d + non-trainable %d, total %d: they must agree",
					p.ParamCount, *p.TrainableParams, *p.NonTrainableParams, *p.TotalParams)
			}
			rows := map[string]string{}
			for _, l := range p.KerasLayers {
				rows[l.Name] = l.OutputShape + " " + itoa(l.Params)
			}
			for _, r := range layers {
				if r["file"] != file {
					continue
				}
				if got, want := rows[r["layer_name"]], r["output_shape"]+" "+r["params"]; got != want {
					t.Errorf("layer %s: got %q, want %q", r["layer_name"], got, want)
				}
			}
		})
	}
}

// Issue 26, shapes that vary: a Keras config whose inputs leave the time
// axis unknown, (None, None, 71), plans once --seq or --input-shape gives
// it a length, with Keras' parameter count; without one the error says
// how to give it. The seq2seq model is keras.io's lstm_seq2seq example
// (latent_dim 256, 71 and 93 characters) as Keras 3 writes it.
func TestPlanKerasUnknownDimensions(t *testing.T) {
	file := kerasTestdata("seq2seq_lstm_none_k3.json")
	for _, args := range [][]string{
		{"--seq", "20"},
		{"--input-shape", "input_layer=20x71", "--input-shape", "input_layer_1=15x93"},
	} {
		if p := planKeras(t, append([]string{"--keras", file}, args...)...); *p.TotalParams != 718173 {
			t.Errorf("%v: total_params %d, want 718173", args, *p.TotalParams)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "give it a size (--input-shape input_layer=Tx71, or --seq T for a sequence's length)"},
		{[]string{"--input-shape", "input_layer=20x70", "--seq", "20"}, "dimension 2 is 71"},
		{[]string{"--input-shape", "decoder=20x93", "--seq", "20"}, "decoder, which the model does not have; its inputs: input_layer, input_layer_1"},
		{[]string{"--input-shape", "20x71", "--seq", "20"}, "without a name was given, but the model has 2 inputs"},
		{[]string{"--input-shape", "input_layer=20xx71"}, "\"\" is not a positive size"},
	} {
		status, _, stderr := run(t, append([]string{"plan", "--batch", "1", "--keras", file}, tc.args...)...)
		if status == 0 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: status %d, stderr %q: want an error containing %q", tc.args, status, stderr, tc.want)
		}
	}
	// a Keras 3 Sequential of the shared files: LSTM(32) over (None, None, 1)
	shared := filepath.Join("..", "..", "..", "shared", "keras-files", "k392_lstm_forecast_nonetime.keras")
	if p := planKeras(t, "--keras", shared, "--seq", "30"); *p.TotalParams != 16397 {
		t.Errorf("k392: total_params %d, want 16397", *p.TotalParams)
	}
}

// Acceptance 4 of issue 26 through the CLI: keras.applications'
// EfficientNetB0 (Dropout with a per-example noise shape, a per-channel
// Rescaling, an adapted Normalization) and MobileNetV3Small (keras.ops
// nodes with constants, an input of unknown size planned at 224x224) plan
// with Keras' published parameter counts.
func TestPlanKerasApplications(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		model  string
		args   []string
		params int
	}{
		{"EfficientNetB0", nil, 5330571},
		{"MobileNetV3Small", []string{"--input-shape", "224x224x3"}, 2554968},
	} {
		f, err := os.Open(kerasTestdata(filepath.Join("applications", tc.model+".json.gz")))
		if err != nil {
			t.Fatal(err)
		}
		zr, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(zr)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, tc.model+".json")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if p := planKeras(t, append([]string{"--keras", path}, tc.args...)...); *p.TotalParams != tc.params {
			t.Errorf("%s: total_params %d, want %d", tc.model, *p.TotalParams, tc.params)
		}
	}
}

// Keras' preprocessing layers train from the CLI: a config with
// RandomRotation, RandomZoom, RandomTranslation, RandomContrast (active in
// training, the identity on the test set) and Resizing before a small CNN
// trains on the digits with planned == measured and its loss falling.
func TestTrainKerasAugmentation(t *testing.T) {
	status, stdout, stderr := run(t, "train", "--keras", kerasTestdata("digits_augment_k3.json"), "--epochs", "3", "--threads", "2")
	if status != 0 {
		t.Fatalf("status %d: %s", status, stderr)
	}
	r := result(t, stdout)
	if planned, measured := integer(t, r, "planned_peak_bytes"), integer(t, r, "measured_peak_bytes"); planned != measured {
		t.Errorf("planned_peak_bytes %d != measured_peak_bytes %d", planned, measured)
	}
	if first, final := num(t, r, "first_loss"), num(t, r, "final_loss"); !(final < first) {
		t.Errorf("final_loss %v, first_loss %v: want the loss to fall", final, first)
	}
	if acc := num(t, r, "test_acc"); acc < 0.3 {
		t.Errorf("test_acc %v after 3 epochs, want at least 0.3", acc)
	}
}
