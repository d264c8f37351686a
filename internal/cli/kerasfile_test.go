package cli_test

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/headroom-ml/headroom/nn/keras"
)

// kerasFilesDir is ../shared/keras-files: model files written by others
// with Keras 1.1 to 3.15, read from there (they carry no licence to copy).
func kerasFilesDir() string { return filepath.Join("..", "..", "..", "shared", "keras-files") }

// sharedFile says what a file of ../shared/keras-files gives today.
//
//	exact:   plan --keras FILE reports EXPECTED.tsv's total_params, and
//	         every weight of the file loads into the model.
//	pending: the file is read (config and weights parsed, the file's
//	         weights count to total_params) but a layer or a shape is not
//	         supported yet: plan's refusal names it. When nn/keras maps it,
//	         flip the row to exact.
//	python:  the file holds Python (a Lambda, a subclassed model, a custom
//	         loss): it is refused by that name.
type sharedFile struct {
	file, config string   // config: --keras-config for a weights-only file
	status       string   // exact, pending, python
	refusal      string   // what a refusal names
	flags        []string // more plan flags
	seq          int      // > 0: --seq, for a time axis the file leaves unknown (None)
}

var sharedFiles = []sharedFile{
	{file: "k111_carnd_nvidia_lambda.h5", status: "python", refusal: "class Lambda is not supported"},
	{file: "k224_seq2seq_katakana_lstm.h5", status: "exact"},
	{file: "k240_teachable_mnv2_catdog.h5", status: "exact"},
	{file: "k211_imdb_embedding_hdf5.keras", status: "exact", seq: 100}, // (None, None) token ids: --seq
	{file: "k215_cifar10_bn_cnn.h5", status: "exact"},                   // its optimizer: Adamax, registered as Custom>Adamax
	{file: "k37_churn_mlp.h5", status: "exact"},
	{file: "k310_battery_soh_gru.h5", status: "exact"},
	{file: "k3151_mnist_cnn.keras", status: "exact"},
	{file: "k310_potato_cnn_preproc.keras", status: "exact"}, // Resizing, Rescaling and random layers inside
	// its float16 weights read as float32; its loss is a Python function
	// registered as Custom>stock_return_loss: plan says so and plans the
	// architecture with the default loss (train refuses it)
	{file: "k310_stock_transformer_fp16.keras", status: "exact"},
	{file: "k392_lstm_forecast_nonetime.keras", status: "exact", seq: 100}, // a None time axis: --seq
	{file: "k3132_diabetes_mlp.keras", status: "exact"},
	{file: "k2131_style_decoder_functional.keras", status: "exact"},
	{file: "k214_hitsong_mlp.keras", status: "exact"},
	{file: "k214_vae_custom_subclass.keras", status: "python", refusal: "model class VAE is not supported"},
	{file: "k216_wifi_mlp_weights.h5", config: "k216_wifi_mlp_arch.json", status: "exact"},
	{file: "k231_carnd_bnaxis1_weights.h5", config: "k231_carnd_bnaxis1_arch.json", status: "exact"}, // BatchNormalization over the height
	{file: "k314_mnist_mlp.weights.h5", config: "k314_mnist_mlp_config.json", status: "exact"},
}

// Acceptance 1 of issue 26: every file of ../shared/keras-files gives its
// exact parameter count in plan, or is read and refused by name.
func TestPlanKerasSharedFiles(t *testing.T) {
	dir := kerasFilesDir()
	expected := readTSV(t, filepath.Join(dir, "EXPECTED.tsv"))
	if len(expected) != len(sharedFiles) {
		t.Fatalf("EXPECTED.tsv lists %d files, the table here %d", len(expected), len(sharedFiles))
	}
	byFile := map[string]map[string]string{}
	for _, r := range expected {
		byFile[r["file"]] = r
	}
	for _, c := range sharedFiles {
		t.Run(c.file, func(t *testing.T) {
			want, ok := byFile[c.file]
			if !ok {
				t.Fatalf("%s is not in EXPECTED.tsv", c.file)
			}
			total, _ := strconv.Atoi(want["total_params"])
			path := filepath.Join(dir, c.file)
			args := []string{"--keras", path}
			var opts []keras.Option
			if c.seq > 0 {
				args = append(args, "--seq", strconv.Itoa(c.seq))
				opts = append(opts, keras.WithSeq(c.seq))
			}
			if c.config != "" {
				args = append(args, "--keras-config", filepath.Join(dir, c.config))
			}
			// the file is read: its config and weights parse, and its
			// weights (not the optimizer's state) are Keras' count
			f, err := keras.OpenFile(path)
			if err != nil {
				t.Fatalf("the file is not read: %v", err)
			}
			if c.config != "" {
				if err := f.WithConfig(filepath.Join(dir, c.config)); err != nil {
					t.Fatal(err)
				}
			}
			if n, err := f.ParamCount(); err != nil || n != int64(total) {
				t.Errorf("the file's weights hold %d values (%v), want %d", n, err, total)
			}
			decoded := 0
			if err := f.RawWeights(func(_ string, _ []int64, v []float32) error { decoded += len(v); return nil }); err != nil || decoded != total {
				t.Errorf("%d weight values decoded (%v), want %d", decoded, err, total)
			}
			switch c.status {
			case "exact":
				p := planKeras(t, append(args, c.flags...)...)
				if *p.TotalParams != total || p.ParamCount != total {
					t.Errorf("total_params %d (param_count %d), want %d", *p.TotalParams, p.ParamCount, total)
				}
				if tr, _ := strconv.Atoi(want["trainable_params"]); *p.TrainableParams != tr {
					t.Errorf("trainable_params %d, want %d", *p.TrainableParams, tr)
				}
				m, err := f.Model(opts...)
				if err != nil {
					t.Fatal(err)
				}
				ws, err := keras.ReadFileWeights(m)
				if err != nil {
					t.Fatalf("the weights do not load: %v", err)
				}
				n := 0
				for _, w := range ws {
					n += w.Shape().Size()
				}
				if n != total {
					t.Errorf("%d weight values loaded, want %d", n, total)
				}
			default:
				status, _, stderr := run(t, append([]string{"plan", "--batch", "1"}, args...)...)
				named := strings.Contains(stderr, c.file) || c.config != "" && strings.Contains(stderr, c.config)
				if status == 0 || !strings.Contains(stderr, c.refusal) || !named {
					t.Errorf("status %d, %q: want a refusal naming the file and %q", status, stderr, c.refusal)
				}
			}
		})
	}
	// the transformer's architecture and float16 weights read exactly
	m, err := keras.Load(filepath.Join(dir, "k310_stock_transformer_fp16.keras"))
	if err != nil {
		t.Fatal(err)
	}
	ws, err := keras.ReadFileWeights(m)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, w := range ws {
		n += w.Shape().Size()
	}
	if m.Params != 50369 || n != 50369 {
		t.Errorf("the float16 transformer: %d params, %d weight values, want 50369", m.Params, n)
	}
}

// h5py returns /usr/bin/python3 when it imports h5py, or skips the test
// (scripts/test.sh installs python3-h5py).
func h5pyPython(t *testing.T) string {
	t.Helper()
	const py = "/usr/bin/python3"
	if out, err := exec.Command(py, "-c", "import h5py, numpy").CombinedOutput(); err != nil {
		t.Skipf("no h5py for %s (apt-get install python3-h5py): %v %s", py, err, bytes.TrimSpace(out))
	}
	return py
}

// kerasTestFiles writes nn/keras/testdata/make_keras_files.py's files.
func kerasTestFiles(t *testing.T) (string, []float64) {
	t.Helper()
	py := h5pyPython(t)
	dir := t.TempDir()
	if out, err := exec.Command(py, kerasTestdata("make_keras_files.py"), dir).CombinedOutput(); err != nil {
		t.Fatalf("make_keras_files.py: %v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Outputs []float64 `json:"outputs"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return dir, m.Outputs
}

// readOutputs reads predict's CSV of outputs.
func readOutputs(t *testing.T, path string) []float64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var out []float64
	for _, r := range rows[1:] {
		for _, s := range r {
			v, err := strconv.ParseFloat(s, 64)
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			out = append(out, v)
		}
	}
	return out
}

// predict after loading a Keras file (every layout, float16 and
// bfloat16 weights included) gives a numpy forward pass's outputs.
func TestPredictKerasFiles(t *testing.T) {
	dir, want := kerasTestFiles(t)
	for _, c := range []struct {
		file, config string
		tol          float64
	}{
		{"k2_full.h5", "", 1e-5}, {"k3_legacy.h5", "", 1e-5}, {"k3.keras", "", 1e-5}, {"k3_chunked.keras", "", 1e-5},
		{"k2_weights.h5", "k2_config.json", 1e-5},
		{"k3_fp16.keras", "", 5e-2}, {"k3_bf16.keras", "", 1e-1}, // the weights rounded to 16 bits
	} {
		t.Run(c.file, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "p.csv")
			args := []string{"predict", "--load", filepath.Join(dir, c.file), "--data", filepath.Join(dir, "inputs.csv"), "--label", "label", "--out", out}
			if c.config != "" {
				args = append(args, "--keras-config", filepath.Join(dir, c.config))
			}
			status, _, stderr := run(t, args...)
			if status != 0 {
				t.Fatalf("status %d: %s", status, stderr)
			}
			got := readOutputs(t, out)
			if len(got) != len(want) {
				t.Fatalf("%d outputs, want %d", len(got), len(want))
			}
			worst := 0.0
			for i := range got {
				worst = math.Max(worst, math.Abs(got[i]-want[i]))
			}
			if worst > c.tol {
				t.Errorf("max |predict - numpy| = %g, want <= %g", worst, c.tol)
			}
		})
	}
}

// preparedDiabetes writes the diabetes CSV as the model's repository fed
// it: zeros (missing values) in Glucose, BloodPressure, SkinThickness,
// Insulin and BMI replaced by the column's mean of the others, then every
// feature standardized (the repository's scaler.pkl is not in the set).
func preparedDiabetes(t *testing.T) string {
	t.Helper()
	f, err := os.Open(filepath.Join(kerasFilesDir(), "data", "k3132_diabetes_mlp.diabetes.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	head, rows := rows[0], rows[1:]
	x := make([][]float64, len(rows))
	for i, r := range rows {
		for _, s := range r[:8] {
			v, err := strconv.ParseFloat(s, 64)
			if err != nil {
				t.Fatal(err)
			}
			x[i] = append(x[i], v)
		}
	}
	for j := 0; j < 8; j++ {
		if j >= 1 && j <= 5 {
			sum, n := 0.0, 0
			for i := range x {
				if x[i][j] != 0 {
					sum, n = sum+x[i][j], n+1
				}
			}
			for i := range x {
				if x[i][j] == 0 {
					x[i][j] = sum / float64(n)
				}
			}
		}
		mean, sq := 0.0, 0.0
		for i := range x {
			mean += x[i][j]
		}
		mean /= float64(len(x))
		for i := range x {
			sq += (x[i][j] - mean) * (x[i][j] - mean)
		}
		sd := math.Sqrt(sq / float64(len(x)))
		for i := range x {
			x[i][j] = (x[i][j] - mean) / sd
		}
	}
	var b strings.Builder
	b.WriteString(strings.Join(head, ",") + "\n")
	for i, r := range rows {
		for _, v := range x[i] {
			fmt.Fprintf(&b, "%.7g,", v)
		}
		b.WriteString(r[8] + "\n")
	}
	p := filepath.Join(t.TempDir(), "diabetes.csv")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// Acceptance 2 of issue 26: training a .keras file starts from its
// weights and its optimizer's state: the first loss is below the same config's from fresh weights
// (--keras-weights=false), and the plan is what the ledger measures.
func TestTrainKerasFineTunes(t *testing.T) {
	file := filepath.Join(kerasFilesDir(), "k3132_diabetes_mlp.keras")
	data := preparedDiabetes(t)
	var first [2]float64
	for i, weights := range []string{"true", "false"} {
		status, stdout, stderr := run(t, "train", "--keras", file, "--data", data, "--label", "Outcome", "--epochs", "1", "--keras-weights="+weights)
		if status != 0 {
			t.Fatalf("status %d: %s", status, stderr)
		}
		if loaded := strings.Contains(stdout, "weights from "+file); loaded != (weights == "true") {
			t.Errorf("--keras-weights=%s: the run says it loaded the file's weights: %v\n%s", weights, loaded, stdout)
		}
		// the RMSprop state Keras kept continues too
		if loaded := strings.Contains(stdout, "optimizer state from "+file+": RMSprop after 860 steps"); loaded != (weights == "true") {
			t.Errorf("--keras-weights=%s: the run says it loaded the file's optimizer state: %v\n%s", weights, loaded, stdout)
		}
		r := result(t, stdout)
		first[i] = num(t, r, "first_loss")
		if planned, measured := integer(t, r, "planned_peak_bytes"), integer(t, r, "measured_peak_bytes"); planned != measured {
			t.Errorf("planned_peak_bytes %d != measured_peak_bytes %d", planned, measured)
		}
	}
	if first[0] >= first[1] {
		t.Errorf("first loss from the file's weights %v, from fresh weights %v: want it lower", first[0], first[1])
	}
}

// --save writes a .keras archive that headroom reads back with the same
// predictions and h5py opens with the same weights: the file's own Keras 3
// config, and one written for a headroom model.
func TestSaveKerasRoundTrip(t *testing.T) {
	py := h5pyPython(t)
	src := filepath.Join(kerasFilesDir(), "k3132_diabetes_mlp.keras")
	data := preparedDiabetes(t)
	dir := t.TempDir()
	saved := filepath.Join(dir, "tuned.keras")
	status, stdout, stderr := run(t, "train", "--keras", src, "--data", data, "--label", "Outcome", "--epochs", "1", "--lr", "0", "--save", saved)
	if status != 0 || !strings.Contains(stdout, "saved the model to "+saved) {
		t.Fatalf("status %d: %s\n%s", status, stderr, stdout)
	}
	var outs [2][]float64
	for i, load := range []string{src, saved} {
		out := filepath.Join(dir, fmt.Sprintf("p%d.csv", i))
		if status, _, stderr := run(t, "predict", "--load", load, "--data", data, "--label", "Outcome", "--out", out); status != 0 {
			t.Fatalf("predict --load %s: status %d: %s", load, status, stderr)
		}
		outs[i] = readOutputs(t, out)
	}
	for i := range outs[0] {
		if outs[0][i] != outs[1][i] {
			t.Fatalf("output %d: %v from the file, %v read back from --save (learning rate 0)", i, outs[0][i], outs[1][i])
		}
	}
	// h5py reads the same weights from both archives
	script := `
import h5py, io, sys, zipfile, numpy as np
def weights(p):
    with zipfile.ZipFile(p) as z:
        f = h5py.File(io.BytesIO(z.read("model.weights.h5")), "r")
        out = {}
        f["layers"].visititems(lambda n, o: out.__setitem__(n, np.array(o)) if isinstance(o, h5py.Dataset) else None)
        return out
a, b = weights(sys.argv[1]), weights(sys.argv[2])
assert sorted(a) == sorted(b), (sorted(a), sorted(b))
for k in a:
    assert a[k].shape == b[k].shape and np.array_equal(a[k], b[k]), k
print(len(a))
`
	out, err := exec.Command(py, "-c", script, src, saved).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "6" {
		t.Errorf("h5py: %v: %s", err, out)
	}
	// a headroom model: its config written, read back with its count
	small := filepath.Join(dir, "small.keras")
	if status, _, stderr := run(t, "train", "--epochs", "1", "--save", small); status != 0 {
		t.Fatalf("status %d: %s", status, stderr)
	}
	if p := planKeras(t, "--keras", small); *p.TotalParams != 9610 {
		t.Errorf("small.keras: %d params, want 9610", *p.TotalParams)
	}
	if out, err := exec.Command(py, "-c", script, small, small).CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "4" {
		t.Errorf("h5py cannot read small.keras: %v: %s", err, out)
	}
	// a model with no Keras config is refused before step 1
	resnet := filepath.Join(dir, "resnet.keras")
	status, stdout, stderr = run(t, "train", "--model", "resnet", "--epochs", "1", "--save", resnet)
	if status == 0 || !strings.Contains(stderr, "--save") || strings.Contains(stdout, "epoch 1/1") {
		t.Errorf("--save resnet.keras: status %d, %s: want a refusal before training", status, stderr)
	}
	if _, err := os.Stat(resnet); err == nil {
		t.Errorf("%s was written", resnet)
	}
}
