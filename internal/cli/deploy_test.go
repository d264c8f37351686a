package cli_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/headroom-ml/headroom/datasets"
)

// onnxruntime-node, installed once with npm into the user's cache
// directory, where export/onnx's tests install it too.
const ortVersion = "1.30.0"

var (
	ortOnce sync.Once
	ortPath string // NODE_PATH for require('onnxruntime-node')
	ortWhy  string // why it is not available
)

// ortSetup returns the NODE_PATH that finds onnxruntime-node, or skips
// the test (fails it under HEADROOM_REQUIRE_NODE=1, as the test command
// runs).
func ortSetup(t *testing.T) string {
	t.Helper()
	ortOnce.Do(func() { ortPath, ortWhy = installORT() })
	if ortWhy != "" {
		if os.Getenv("HEADROOM_REQUIRE_NODE") == "1" {
			t.Fatalf("onnxruntime-node is required (HEADROOM_REQUIRE_NODE=1): %s", ortWhy)
		}
		t.Skipf("skipping the onnxruntime comparison: %s", ortWhy)
	}
	return ortPath
}

func installORT() (nodePath, why string) {
	if _, err := exec.LookPath("node"); err != nil {
		return "", "node is not on PATH"
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err.Error()
	}
	dir := filepath.Join(cache, "headroom", "onnxruntime-node-"+ortVersion)
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "onnxruntime-node", "package.json")); err == nil {
		return filepath.Join(dir, "node_modules"), ""
	}
	if _, err := exec.LookPath("npm"); err != nil {
		return "", "npm is not on PATH (needed once, to install onnxruntime-node)"
	}
	os.MkdirAll(filepath.Dir(dir), 0o755)
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "onnxruntime-node-install-")
	if err != nil {
		return "", err.Error()
	}
	defer os.RemoveAll(tmp)
	// --ignore-scripts: the CPU library ships in the package; the install
	// script only downloads GPU builds
	cmd := exec.Command("npm", "install", "--ignore-scripts", "--no-audit", "--no-fund", "--prefix", tmp, "onnxruntime-node@"+ortVersion)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Sprintf("npm install onnxruntime-node@%s failed: %v\n%s", ortVersion, err, out)
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, serr := os.Stat(filepath.Join(dir, "node_modules", "onnxruntime-node", "package.json")); serr != nil {
			return "", err.Error()
		}
	}
	return filepath.Join(dir, "node_modules"), ""
}

// runORT runs model in onnxruntime-node (export/onnx's run.js) on the
// .npy file x as input "x" and returns its first output as float32s.
func runORT(t *testing.T, model, x string) []float32 {
	t.Helper()
	nodePath := ortSetup(t)
	dir := t.TempDir()
	cmd := exec.Command("node", filepath.Join("..", "..", "export", "onnx", "testdata", "run.js"), model, dir, "x="+x)
	cmd.Env = append(os.Environ(), "NODE_PATH="+nodePath)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("onnxruntime: %v\n%s", err, stderr.String())
	}
	var r struct{ Outputs []string }
	if err := json.Unmarshal(out, &r); err != nil || len(r.Outputs) != 1 {
		t.Fatalf("run.js printed %q (%v), want one output", out, err)
	}
	_, v := readNPY(t, filepath.Join(dir, "0.npy"))
	return v
}

var npyShape = regexp.MustCompile(`'descr':\s*'<f4',\s*'fortran_order':\s*False,\s*'shape':\s*\(([^)]*)\)`)

// readNPY reads a float32 .npy file.
func readNPY(t *testing.T, path string) ([]int, []float32) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 10 || string(b[:6]) != "\x93NUMPY" || b[6] != 1 {
		t.Fatalf("%s is not a version 1 .npy file", path)
	}
	hlen := 10 + int(binary.LittleEndian.Uint16(b[8:]))
	m := npyShape.FindStringSubmatch(string(b[10:hlen]))
	if m == nil {
		t.Fatalf("%s: header %q, want float32", path, b[10:hlen])
	}
	var shape []int
	for _, s := range strings.Split(m[1], ",") {
		if s = strings.TrimSpace(s); s != "" {
			d, _ := strconv.Atoi(s)
			shape = append(shape, d)
		}
	}
	vals := make([]float32, (len(b)-hlen)/4)
	for i := range vals {
		vals[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[hlen+4*i:]))
	}
	return shape, vals
}

func argmaxRow(v []float32, r, c int) int {
	best := 0
	for k := 1; k < c; k++ {
		if v[r*c+k] > v[r*c+best] {
			best = k
		}
	}
	return best
}

// planTotal reads the "... in total" figure of a printed memory plan.
var planTotal = regexp.MustCompile(`memory plan \(known before [^)]*\): ([0-9.]+) (B|KiB|MiB|GiB) in total`)

func planBytes(t *testing.T, stdout string) float64 {
	t.Helper()
	m := planTotal.FindStringSubmatch(stdout)
	if m == nil {
		t.Fatalf("no memory plan in:\n%s", stdout)
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v * map[string]float64{"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}[m[2]]
}

// Acceptance 2 and 3 of issue 17, through the command: the reference cnn
// trained one epoch on Fashion-MNIST with --save, exported to ONNX and run
// in onnxruntime on the 10,000 test images as an .npy file agrees with
// `headroom predict` on the same file (max |diff| <= 1e-4, the same argmax
// everywhere); the --int8 export keeps onnxruntime's test accuracy within
// 0.01 at <= 0.3x the file size; predict's inference plan at batch 128 is
// at most 0.25x the training plan. It trains for an epoch (a minute or
// more on 2 cores); -short skips it.
func TestFashionMNISTDeployment(t *testing.T) {
	if testing.Short() {
		t.Skip("trains the cnn for an epoch")
	}
	ortSetup(t)
	_, testSet, err := datasets.FashionMNIST("")
	if err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	model := filepath.Join(dir, "cnn.safetensors")
	status, stdout, stderr := run(t, "train", "--model", "cnn", "--dataset", "fashion-mnist", "--epochs", "1", "--batch", "128", "--threads", "2", "--save", model)
	if status != 0 {
		t.Fatalf("train: status %d\n%s%s", status, stdout, stderr)
	}
	trainPlan := planBytes(t, stdout)

	// the test images as the model's input, float32 [10000, 28, 28, 1]
	var px bytes.Buffer
	for _, p := range testSet.Pixels {
		binary.Write(&px, binary.LittleEndian, float32(p)*testSet.Scale)
	}
	images := filepath.Join(dir, "test.npy")
	os.WriteFile(images, npy("<f4", []int{testSet.N, 28, 28, 1}, px.Bytes()), 0o644)

	pred := filepath.Join(dir, "pred.npy")
	status, stdout, stderr = run(t, "predict", "--load", model, "--data", images, "--out", pred, "--batch", "128", "--threads", "2")
	if status != 0 {
		t.Fatalf("predict: status %d\n%s%s", status, stdout, stderr)
	}
	if ratio := planBytes(t, stdout) / trainPlan; ratio > 0.25 {
		t.Errorf("the inference plan at batch 128 is %.3fx the training plan, want <= 0.25x:\n%s", ratio, stdout)
	} else {
		t.Logf("inference plan / training plan at batch 128: %.3f", ratio)
	}
	shape, want := readNPY(t, pred)
	if len(shape) != 2 || shape[0] != testSet.N || shape[1] != 10 {
		t.Fatalf("predict wrote shape %v, want [%d 10]", shape, testSet.N)
	}

	f32, i8 := filepath.Join(dir, "cnn.onnx"), filepath.Join(dir, "cnn-int8.onnx")
	for _, args := range [][]string{{"--out", f32}, {"--out", i8, "--int8"}} {
		status, stdout, stderr = run(t, append([]string{"export", "--load", model, "--format", "onnx", "--threads", "2"}, args...)...)
		if status != 0 {
			t.Fatalf("export %v: status %d\n%s%s", args, status, stdout, stderr)
		}
	}
	gotF, gotQ := runORT(t, f32, images), runORT(t, i8, images)
	if len(gotF) != len(want) || len(gotQ) != len(want) {
		t.Fatalf("onnxruntime gave %d and %d values, want %d", len(gotF), len(gotQ), len(want))
	}
	var diff float64
	agree, rightH, rightF, rightQ := 0, 0, 0, 0
	for r := 0; r < testSet.N; r++ {
		for k := 0; k < 10; k++ {
			diff = math.Max(diff, math.Abs(float64(gotF[r*10+k]-want[r*10+k])))
		}
		h, f, q, l := argmaxRow(want, r, 10), argmaxRow(gotF, r, 10), argmaxRow(gotQ, r, 10), int(testSet.Labels[r])
		if h == f {
			agree++
		}
		if h == l {
			rightH++
		}
		if f == l {
			rightF++
		}
		if q == l {
			rightQ++
		}
	}
	n := float64(testSet.N)
	sf, _ := os.Stat(f32)
	sq, _ := os.Stat(i8)
	size := float64(sq.Size()) / float64(sf.Size())
	t.Logf("float: max |onnxruntime - headroom predict| %.3g, argmax agreement %d/%d; test accuracy headroom %.4f, onnxruntime %.4f; int8: %.4f at %.3fx the size",
		diff, agree, testSet.N, float64(rightH)/n, float64(rightF)/n, float64(rightQ)/n, size)
	if !(diff <= 1e-4) || agree != testSet.N {
		t.Errorf("float export: max |diff| %g (want <= 1e-4), argmax agreement %d of %d (want all)", diff, agree, testSet.N)
	}
	if accF, accQ := float64(rightF)/n, float64(rightQ)/n; accQ < accF-0.01 || size > 0.3 {
		t.Errorf("int8 export: accuracy %.4f vs float %.4f (want within 0.01), size %.3fx (want <= 0.3x)", accQ, accF, size)
	}
}

// TestVisionExport: the ResNet-20 (a functional model: BatchNormalization
// folded into its convolutions, residual sums, the zero padding of its
// stride-2 convolutions) and the U-Net (transposed convolutions,
// concatenated skips, a per-pixel output) export to ONNX, and onnxruntime
// gives what `headroom predict` gives on the same images.
func TestVisionExport(t *testing.T) {
	ortSetup(t)
	for _, tc := range []struct {
		model, dataset string
		side, outputs  int // image side; output values per image
	}{
		{"resnet", "digits", 8, 10},
		{"unet", "shapes", 32, 32 * 32 * 4},
	} {
		t.Run(tc.model, func(t *testing.T) {
			dir := t.TempDir()
			model := filepath.Join(dir, tc.model+".safetensors")
			status, stdout, stderr := run(t, "train", "--model", tc.model, "--dataset", tc.dataset, "--epochs", "1", "--max-steps", "8", "--batch", "32", "--threads", "2", "--save", model)
			if status != 0 {
				t.Fatalf("train: status %d\n%s%s", status, stdout, stderr)
			}
			const n = 12
			var px bytes.Buffer
			for i := 0; i < n*tc.side*tc.side; i++ {
				binary.Write(&px, binary.LittleEndian, float32((i*7919)%97)/96)
			}
			images := filepath.Join(dir, "x.npy")
			os.WriteFile(images, npy("<f4", []int{n, tc.side, tc.side, 1}, px.Bytes()), 0o644)
			pred := filepath.Join(dir, "pred.npy")
			if status, stdout, stderr = run(t, "predict", "--load", model, "--data", images, "--out", pred, "--threads", "2"); status != 0 {
				t.Fatalf("predict: status %d\n%s%s", status, stdout, stderr)
			}
			_, want := readNPY(t, pred)
			onnxFile := filepath.Join(dir, tc.model+".onnx")
			if status, stdout, stderr = run(t, "export", "--load", model, "--format", "onnx", "--out", onnxFile, "--threads", "2"); status != 0 {
				t.Fatalf("export: status %d\n%s%s", status, stdout, stderr)
			}
			got := runORT(t, onnxFile, images)
			if len(got) != len(want) || len(want) != n*tc.outputs {
				t.Fatalf("onnxruntime gave %d values, headroom predict %d, want %d", len(got), len(want), n*tc.outputs)
			}
			var diff float64
			for i := range want {
				diff = math.Max(diff, math.Abs(float64(got[i]-want[i])))
			}
			t.Logf("max |onnxruntime - headroom predict| %.3g", diff)
			if !(diff <= 1e-4) {
				t.Errorf("max |onnxruntime - headroom predict| = %g, want <= 1e-4", diff)
			}
		})
	}
}

// TestLanguageModelExport (issue 26, acceptance 5): the gpt (layer norm,
// causal attention, gelu) and the lstm (unrolled over the window), trained
// a few steps on a text file with --seq 32 and saved, export to ONNX, and
// onnxruntime gives the logits `headroom predict` gives on the same int32
// token windows (an .npy [N, 32]), within 1e-4. --int8 calibrates on
// windows of the text (--calibration-data); without it, it says what it
// needs.
func TestLanguageModelExport(t *testing.T) {
	ortSetup(t)
	const n, T = 6, 32
	text := textFile(t, 20000)
	src, err := os.ReadFile(text)
	if err != nil {
		t.Fatal(err)
	}
	var ids bytes.Buffer // n windows of the text, as predict and onnxruntime read them
	for i := 0; i < n; i++ {
		for _, b := range src[i*2917 : i*2917+T] {
			binary.Write(&ids, binary.LittleEndian, int32(b))
		}
	}
	for _, model := range []string{"gpt", "lstm"} {
		t.Run(model, func(t *testing.T) {
			dir := t.TempDir()
			windows := filepath.Join(dir, "x.npy")
			os.WriteFile(windows, npy("<i4", []int{n, T}, ids.Bytes()), 0o644)
			file := filepath.Join(dir, model+".safetensors")
			status, stdout, stderr := run(t, "train", "--model", model, "--text", text, "--seq", strconv.Itoa(T), "--batch", "8", "--max-steps", "5", "--threads", "2", "--save", file)
			if status != 0 {
				t.Fatalf("train: status %d\n%s%s", status, stdout, stderr)
			}
			pred := filepath.Join(dir, "pred.npy")
			if status, stdout, stderr = run(t, "predict", "--load", file, "--data", windows, "--out", pred, "--threads", "2"); status != 0 {
				t.Fatalf("predict: status %d\n%s%s", status, stdout, stderr)
			}
			shape, want := readNPY(t, pred)
			if len(shape) != 3 || shape[0] != n || shape[1] != T || shape[2] != 256 {
				t.Fatalf("predict wrote shape %v, want [%d %d 256]", shape, n, T)
			}
			f32, i8 := filepath.Join(dir, model+".onnx"), filepath.Join(dir, model+"-int8.onnx")
			if status, stdout, stderr = run(t, "export", "--load", file, "--out", f32, "--threads", "2"); status != 0 {
				t.Fatalf("export: status %d\n%s%s", status, stdout, stderr)
			}
			got := runORT(t, f32, windows)
			if len(got) != len(want) {
				t.Fatalf("onnxruntime gave %d values, headroom predict %d", len(got), len(want))
			}
			var diff float64
			for i := range want {
				diff = math.Max(diff, math.Abs(float64(got[i]-want[i])))
			}
			t.Logf("max |onnxruntime - headroom predict| %.3g", diff)
			if !(diff <= 1e-4) {
				t.Errorf("max |onnxruntime - headroom predict| = %g, want <= 1e-4", diff)
			}

			status, _, stderr = run(t, "export", "--load", file, "--out", i8, "--int8", "--threads", "2")
			if status != 1 || !strings.Contains(stderr, "--int8 on a language model needs --calibration-data") {
				t.Errorf("--int8 without --calibration-data: status %d, %q; want 1 and what it needs", status, stderr)
			}
			status, stdout, stderr = run(t, "export", "--load", file, "--out", i8, "--int8", "--calibration-data", text, "--calibration-batches", "1", "--threads", "2")
			if status != 0 {
				t.Fatalf("export --int8: status %d\n%s%s", status, stdout, stderr)
			}
			q := runORT(t, i8, windows)
			agree := 0
			for r := 0; r < n*T; r++ {
				if argmaxRow(q, r, 256) == argmaxRow(want, r, 256) {
					agree++
				}
			}
			t.Logf("int8: argmax agreement with headroom predict %d/%d", agree, n*T)
			if agree < n*T*9/10 {
				t.Errorf("int8: argmax agreement %d of %d, want >= 90%%", agree, n*T)
			}
		})
	}
}
