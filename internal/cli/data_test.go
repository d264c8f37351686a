package cli_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// snapshot records every file under dir: its content's hash, size, mode
// and modification time.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	snap := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		h := ""
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			h = fmt.Sprintf("%x", sha256.Sum256(b))
		}
		snap[p] = fmt.Sprintf("%s %d %v %d", h, info.Size(), info.Mode(), info.ModTime().UnixNano())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// sameSnapshot fails the test when dir's files changed since before.
func sameSnapshot(t *testing.T, dir string, before map[string]string) {
	t.Helper()
	after := snapshot(t, dir)
	for p, s := range before {
		if after[p] != s {
			t.Errorf("%s changed: %q -> %q", p, s, after[p])
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			t.Errorf("%s appeared in the user's data folder", p)
		}
	}
}

// npy builds a version-1 .npy file.
func npy(descr string, shape []int, data []byte) []byte {
	dims := ""
	for _, d := range shape {
		dims += fmt.Sprintf("%d, ", d)
	}
	h := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr, dims)
	for (10+len(h)+1)%64 != 0 {
		h += " "
	}
	h += "\n"
	b := append([]byte("\x93NUMPY\x01\x00"), byte(len(h)), byte(len(h)>>8))
	return append(append(b, h...), data...)
}

// userData writes the three data sets of acceptance 1 into dir: a CSV
// whose label column (class names) is in the middle, NPY arrays, and a
// folder of PNGs in class sub-folders. Each is learnable: the classes
// differ in their mean.
func userData(t *testing.T, dir string) (csvPath, npyX, npyY, images string) {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, 7))
	names := []string{"setosa", "versicolor", "virginica"}
	var c bytes.Buffer
	c.WriteString("sepal_length,sepal_width,species,petal_length,petal_width\n")
	for i := 0; i < 300; i++ {
		k := rng.IntN(3)
		f := func(scale float64) float64 { return float64(k)*scale + rng.NormFloat64()*0.3 }
		fmt.Fprintf(&c, "%.3f,%.3f,%s,%.3f,%.3f\n", f(1), f(-0.5), names[k], f(2), f(0.7))
	}
	csvPath = filepath.Join(dir, "iris.csv")
	os.WriteFile(csvPath, c.Bytes(), 0o644)

	const n, d = 400, 16
	var xs, ys []byte
	for i := 0; i < n; i++ {
		k := rng.IntN(4)
		for j := 0; j < d; j++ {
			v := float32(rng.NormFloat64()*0.5) + float32(k)*float32(j%4-1)
			xs = binary.LittleEndian.AppendUint32(xs, math.Float32bits(v))
		}
		ys = binary.LittleEndian.AppendUint64(ys, uint64(k))
	}
	npyX, npyY = filepath.Join(dir, "x.npy"), filepath.Join(dir, "y.npy")
	os.WriteFile(npyX, npy("<f4", []int{n, d}, xs), 0o644)
	os.WriteFile(npyY, npy("<i8", []int{n}, ys), 0o644)

	images = filepath.Join(dir, "shapes")
	colors := map[string]color.RGBA{"red": {220, 40, 30, 255}, "green": {30, 200, 60, 255}, "blue": {40, 50, 210, 255}}
	for class, col := range colors {
		os.MkdirAll(filepath.Join(images, class), 0o755)
		for i := 0; i < 40; i++ {
			m := image.NewRGBA(image.Rect(0, 0, 10, 12)) // resized to 8x8
			for p := 0; p < len(m.Pix); p += 4 {
				jit := func(v uint8) uint8 { return uint8(max(0, min(255, int(v)+rng.IntN(120)-60))) }
				m.Pix[p], m.Pix[p+1], m.Pix[p+2], m.Pix[p+3] = jit(col.R), jit(col.G), jit(col.B), 255
			}
			var b bytes.Buffer
			png.Encode(&b, m)
			os.WriteFile(filepath.Join(images, class, fmt.Sprintf("img%02d.png", i)), b.Bytes(), 0o644)
		}
	}
	return csvPath, npyX, npyY, images
}

// Acceptance 1 of issue 17: a CSV with a class-name label column in the
// middle, NPY arrays and a folder of PNGs in class sub-folders each train
// from the command line with --validation-split 0.2, report val_acc, plan
// exactly what they measure, and leave the user's files as they were. The
// saved models then predict and evaluate on the same files.
func TestTrainOnUserData(t *testing.T) {
	dir := t.TempDir()
	csvPath, npyX, npyY, images := userData(t, dir)
	// mtimes in the past, so a rewrite in the same clock tick would show
	old := time.Now().Add(-time.Hour)
	filepath.WalkDir(dir, func(p string, _ fs.DirEntry, _ error) error { return os.Chtimes(p, old, old) })
	before := snapshot(t, dir)
	out := t.TempDir()
	for _, tc := range []struct {
		name    string
		args    []string
		minAcc  float64
		predict []string // flags of predict and evaluate besides --load
	}{
		{"csv", []string{"--data", csvPath, "--label", "species"}, 0.8, []string{"--data", csvPath}},
		{"npy", []string{"--data", npyX, "--labels", npyY}, 0.8, []string{"--data", npyX, "--labels", npyY}},
		{"png", []string{"--data", images, "--image-size", "8x8"}, 0.8, []string{"--data", images}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			model := filepath.Join(out, tc.name+".safetensors")
			args := append([]string{"train", "--validation-split", "0.2", "--epochs", "15", "--batch", "16", "--threads", "2", "--save", model}, tc.args...)
			status, stdout, stderr := run(t, args...)
			if status != 0 {
				t.Fatalf("headroom %s: status %d\n%s%s", strings.Join(args, " "), status, stdout, stderr)
			}
			r := result(t, stdout)
			if acc := num(t, r, "val_acc"); acc < tc.minAcc {
				t.Errorf("val_acc=%v, want >= %v", acc, tc.minAcc)
			}
			if num(t, r, "val_loss") <= 0 {
				t.Errorf("val_loss=%s, want positive", r["val_loss"])
			}
			if planned, measured := integer(t, r, "planned_peak_bytes"), integer(t, r, "measured_peak_bytes"); planned <= 0 || planned != measured {
				t.Errorf("planned_peak_bytes=%d, measured_peak_bytes=%d: want equal", planned, measured)
			}
			if !strings.Contains(stdout, "validation examples") {
				t.Errorf("the run does not say how many examples it validates on:\n%s", stdout)
			}

			// the model file alone predicts and evaluates on the same data
			pred := filepath.Join(out, tc.name+".csv")
			status, stdout, stderr = run(t, append([]string{"predict", "--load", model, "--out", pred, "--threads", "2"}, tc.predict...)...)
			if status != 0 {
				t.Fatalf("predict: status %d\n%s%s", status, stdout, stderr)
			}
			if !strings.Contains(stdout, "inference step: params") {
				t.Errorf("predict does not print its inference plan:\n%s", stdout)
			}
			b, err := os.ReadFile(pred)
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			if tc.name == "csv" && lines[0] != "setosa,versicolor,virginica" {
				t.Errorf("predict's CSV header %q, want the class names", lines[0])
			}
			if tc.name == "png" && !strings.HasPrefix(lines[0], "file,blue,green,red") {
				t.Errorf("predict's CSV header %q, want file and the class names", lines[0])
			}
			status, stdout, stderr = run(t, append([]string{"evaluate", "--load", model, "--threads", "2"}, tc.predict...)...)
			if status != 0 {
				t.Fatalf("evaluate: status %d\n%s%s", status, stdout, stderr)
			}
			if acc := num(t, fields(t, stdout), "acc"); acc < tc.minAcc {
				t.Errorf("evaluate: acc=%v, want >= %v", acc, tc.minAcc)
			}
		})
	}
	sameSnapshot(t, dir, before)
}

// fields returns the key=value fields of stdout's one RESULT line.
func fields(t *testing.T, stdout string) map[string]string {
	t.Helper()
	m := map[string]string{}
	n := 0
	for _, l := range strings.Split(stdout, "\n") {
		if !strings.HasPrefix(l, "RESULT ") {
			continue
		}
		n++
		for _, f := range strings.Fields(strings.TrimPrefix(l, "RESULT ")) {
			k, v, _ := strings.Cut(f, "=")
			m[k] = v
		}
	}
	if n != 1 {
		t.Fatalf("got %d RESULT lines, want 1:\n%s", n, stdout)
	}
	return m
}

// Malformed inputs end in one line naming the file and the line or byte
// offset, and a non-zero status.
func TestMalformedData(t *testing.T) {
	dir := t.TempDir()
	csvPath, npyX, _, images := userData(t, dir)
	ragged := filepath.Join(dir, "ragged.csv")
	b, _ := os.ReadFile(csvPath)
	lines := strings.Split(string(b), "\n")
	lines[5] = "1.0,2.0,setosa"
	os.WriteFile(ragged, []byte(strings.Join(lines, "\n")), 0o644)
	nonNumber := filepath.Join(dir, "text.csv")
	lines[5] = "1.0,abc,setosa,3,4"
	os.WriteFile(nonNumber, []byte(strings.Join(lines, "\n")), 0o644)
	lying := filepath.Join(dir, "lying.npy")
	x, _ := os.ReadFile(npyX)
	os.WriteFile(lying, bytes.Replace(x, []byte("(400, 16, )"), []byte("(900, 16, )"), 1), 0o644)
	y900 := filepath.Join(dir, "y900.npy")
	os.WriteFile(y900, npy("<i8", []int{900}, make([]byte, 900*8)), 0o644)
	truncated := filepath.Join(images, "red", "img03.png")
	p, _ := os.ReadFile(truncated)
	os.WriteFile(truncated, p[:len(p)/2], 0o644)
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"ragged_csv", []string{"--data", ragged, "--label", "species"}, []string{ragged, "line 6", "fields"}},
		{"non_number", []string{"--data", nonNumber, "--label", "species"}, []string{nonNumber, "line 6", "sepal_width", "abc"}},
		{"lying_npy", []string{"--data", lying, "--labels", y900}, []string{lying, fmt.Sprintf("at byte %d", 10+int(binary.LittleEndian.Uint16(x[8:]))+400*16*4), "truncated at row 400 of 900"}},
		{"rows_differ", []string{"--data", npyX, "--labels", y900}, []string{npyX, "400 rows", y900, "900"}},
		{"truncated_png", []string{"--data", images, "--image-size", "8x8"}, []string{truncated, "byte 0"}},
		{"unknown_format", []string{"--data", filepath.Join(dir, "x.bin")}, []string{"x.bin"}},
		{"text", []string{"--data", filepath.Join(dir, "book.txt")}, []string{"text", "sequence"}},
		{"split_and_data", []string{"--data", csvPath, "--validation-split", "0.2", "--validation-data", csvPath}, []string{"--validation-split", "--validation-data"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.WriteFile(filepath.Join(dir, "x.bin"), []byte{1}, 0o644)
			os.WriteFile(filepath.Join(dir, "book.txt"), []byte("once upon a time"), 0o644)
			status, stdout, stderr := run(t, append([]string{"train", "--epochs", "1", "--threads", "2"}, tc.args...)...)
			if status == 0 {
				t.Fatalf("status 0, want non-zero\n%s", stdout)
			}
			if l := strings.Split(strings.TrimRight(stderr, "\n"), "\n"); len(l) != 1 || !strings.HasPrefix(l[0], "headroom: ") {
				t.Errorf("stderr is not one line starting with \"headroom: \":\n%s", stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr does not mention %q:\n%s", w, stderr)
				}
			}
		})
	}
}

// Data streamed from its files trains as data in memory does, its
// validation split held out by content; the pipeline's memory comes on
// top of the plan, within its budget.
func TestTrainStreamed(t *testing.T) {
	dir := t.TempDir()
	_, npyX, npyY, _ := userData(t, dir)
	// 150,000 examples of 16 features (9.2 MiB): more than half of what a
	// 50 MiB process budget leaves a plan (18 MiB)
	const big = 150000
	rng := rand.New(rand.NewPCG(3, 3))
	var xs, ys []byte
	for i := 0; i < big; i++ {
		k := rng.IntN(4)
		for j := 0; j < 16; j++ {
			xs = binary.LittleEndian.AppendUint32(xs, math.Float32bits(float32(rng.NormFloat64()*0.5)+float32(k)*float32(j%4-1)))
		}
		ys = binary.LittleEndian.AppendUint64(ys, uint64(k))
	}
	bigX, bigY := filepath.Join(dir, "big_x.npy"), filepath.Join(dir, "big_y.npy")
	os.WriteFile(bigX, npy("<f4", []int{big, 16}, xs), 0o644)
	os.WriteFile(bigY, npy("<i8", []int{big}, ys), 0o644)
	before := snapshot(t, dir)
	for _, args := range [][]string{
		{"--data", npyX, "--labels", npyY, "--stream", "--pipeline-budget", "8MiB", "--epochs", "10", "--batch", "16"},
		// data that would take more than half the budget: streamed without asking
		{"--data", bigX, "--labels", bigY, "--budget", "50MiB", "--pipeline-budget", "8MiB", "--epochs", "2", "--batch", "256"},
	} {
		status, stdout, stderr := run(t, append([]string{"train", "--validation-split", "0.2", "--threads", "2"}, args...)...)
		if status != 0 {
			t.Fatalf("train %v: status %d\n%s%s", args, status, stdout, stderr)
		}
		if !strings.Contains(stdout, "input pipeline: ") {
			t.Errorf("train %v: the run was not streamed:\n%s", args, stdout)
		}
		r := result(t, stdout)
		if acc := num(t, r, "val_acc"); acc < 0.7 {
			t.Errorf("train %v: val_acc=%v, want >= 0.7", args, acc)
		}
		// the plan counts the pipeline's budget
		planned, measured := integer(t, r, "planned_peak_bytes"), integer(t, r, "measured_peak_bytes")
		if measured > planned || planned < 8<<20 {
			t.Errorf("train %v: measured %d B, planned %d B: want the plan, with the pipeline's 8 MiB, to hold what was measured", args, measured, planned)
		}
	}
	sameSnapshot(t, dir, before)
}

// Keras habits as flags: augmentation, a schedule, class weights,
// clipping and early stopping train together; bad values are refused.
func TestKerasHabits(t *testing.T) {
	dir := t.TempDir()
	_, _, _, images := userData(t, dir)
	status, stdout, stderr := run(t, "train", "--data", images, "--image-size", "8x8", "--validation-split", "0.2", "--epochs", "40", "--batch", "16",
		"--threads", "2", "--augment", "flip,crop", "--lr-schedule", "cosine", "--class-weight", "balanced", "--clip-norm", "1", "--early-stopping-patience", "3")
	if status != 0 {
		t.Fatalf("status %d\n%s%s", status, stdout, stderr)
	}
	r := result(t, stdout)
	if acc := num(t, r, "val_acc"); acc < 0.7 {
		t.Errorf("val_acc=%v, want >= 0.7", acc)
	}
	// nothing learnt at a learning rate of 0: val_loss never improves, and
	// patience 1 stops after the second epoch
	status, stdout, stderr = run(t, "train", "--data", images, "--image-size", "8x8", "--validation-split", "0.2", "--epochs", "10", "--threads", "2",
		"--lr", "0", "--early-stopping-patience", "1")
	if status != 0 || !strings.Contains(stdout, "epoch 2/10") || strings.Contains(stdout, "epoch 3/10") {
		t.Errorf("early stopping with patience 1 at lr 0: status %d, want two epochs:\n%s%s", status, stdout, stderr)
	}
	for _, tc := range []struct{ flag, value string }{
		{"--lr-schedule", "sawtooth"}, {"--class-weight", "inverse"}, {"--augment", "rotate"}, {"--image-size", "8by8"},
		{"--rescale", "1/0"}, {"--color", "sepia"}, {"--early-stopping-patience", "-1"},
	} {
		status, _, stderr := run(t, "train", "--data", images, "--image-size", "8x8", "--epochs", "1", tc.flag, tc.value)
		if status == 0 || !strings.Contains(stderr, tc.flag) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("%s %s: status %d, stderr %q: want one line naming the flag", tc.flag, tc.value, status, stderr)
		}
	}
}

// The new commands: help on stdout, a version, and every mistake one
// line on stderr.
func TestDeployCommands(t *testing.T) {
	for _, cmd := range []string{"predict", "evaluate", "export", "train"} {
		status, stdout, stderr := run(t, cmd, "-h")
		if status != 0 || !strings.Contains(stdout, "-load") && cmd != "train" || !strings.Contains(stdout, "Usage of headroom "+cmd) || stderr != "" {
			t.Errorf("%s -h: status %d, stdout %q, stderr %q: want the flags on stdout", cmd, status, stdout, stderr)
		}
	}
	status, stdout, _ := run(t, "version")
	if status != 0 || !regexp.MustCompile(`^headroom \S+ .*go1\.\d+.* \w+/\w+\n$`).MatchString(stdout) {
		t.Errorf("version: status %d, %q", status, stdout)
	}
	status, stdout, _ = run(t, "help")
	for _, c := range []string{"predict", "evaluate", "export", "version"} {
		if !strings.Contains(stdout, "headroom "+c) {
			t.Errorf("help does not list %s:\n%s", c, stdout)
		}
	}

	dir := t.TempDir()
	csvPath, _, _, _ := userData(t, dir)
	model := filepath.Join(dir, "m.safetensors")
	if status, stdout, stderr := run(t, "train", "--data", csvPath, "--label", "species", "--threads", "2", "--save", model); status != 0 {
		t.Fatalf("train: %d\n%s%s", status, stdout, stderr)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"predict_no_load", []string{"predict", "--data", csvPath, "--out", "o.npy"}, "--load"},
		{"predict_no_out", []string{"predict", "--load", model, "--data", csvPath}, "--out"},
		{"predict_bad_out", []string{"predict", "--load", model, "--data", csvPath, "--out", filepath.Join(dir, "o.txt")}, ".npy or .csv"},
		{"predict_over_input", []string{"predict", "--load", model, "--data", csvPath, "--out", csvPath}, "overwrite"},
		{"predict_missing_model", []string{"predict", "--load", filepath.Join(dir, "none.safetensors"), "--data", csvPath, "--out", filepath.Join(dir, "o.npy")}, "none.safetensors"},
		{"evaluate_not_a_model", []string{"evaluate", "--load", csvPath, "--data", csvPath}, "iris.csv"},
		{"evaluate_other_columns", []string{"evaluate", "--load", model, "--data", filepath.Join(dir, "x.npy")}, "--labels"},
		{"export_format", []string{"export", "--load", model, "--out", filepath.Join(dir, "m.tflite"), "--format", "tflite"}, "tflite"},
		{"export_calibration_without_int8", []string{"export", "--load", model, "--out", filepath.Join(dir, "m.onnx"), "--calibration-data", csvPath}, "--int8"},
		{"export_opset", []string{"export", "--load", model, "--out", filepath.Join(dir, "m.onnx"), "--opset", "9"}, "--opset"},
		{"version_argument", []string{"version", "now"}, "now"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, stdout, stderr := run(t, tc.args...)
			if status == 0 {
				t.Fatalf("status 0:\n%s", stdout)
			}
			if l := strings.Split(strings.TrimRight(stderr, "\n"), "\n"); len(l) != 1 || !strings.HasPrefix(l[0], "headroom: ") || !strings.Contains(stderr, tc.want) {
				t.Errorf("stderr %q: want one line mentioning %q", stderr, tc.want)
			}
		})
	}
	if b, _ := os.ReadFile(csvPath); !bytes.HasPrefix(b, []byte("sepal_length,")) {
		t.Errorf("a refused command changed %s", csvPath)
	}
}

// A model trained on images of one size (no --image-size) predicts on
// images of another: they are resized to the training size.
func TestPredictResizesImages(t *testing.T) {
	dir := t.TempDir()
	_, _, _, images := userData(t, dir) // 10x12 images
	model := filepath.Join(dir, "m.safetensors")
	if status, stdout, stderr := run(t, "train", "--data", images, "--epochs", "3", "--threads", "2", "--save", model); status != 0 {
		t.Fatalf("train: %d\n%s%s", status, stdout, stderr)
	}
	other := filepath.Join(dir, "new")
	os.MkdirAll(other, 0o755)
	m := image.NewRGBA(image.Rect(0, 0, 30, 20))
	for p := 0; p < len(m.Pix); p += 4 {
		m.Pix[p], m.Pix[p+3] = 230, 255 // red
	}
	var b bytes.Buffer
	png.Encode(&b, m)
	os.WriteFile(filepath.Join(other, "big.png"), b.Bytes(), 0o644)
	out := filepath.Join(dir, "p.csv")
	status, stdout, stderr := run(t, "predict", "--load", model, "--data", other, "--out", out, "--threads", "2")
	if status != 0 {
		t.Fatalf("predict: %d\n%s%s", status, stdout, stderr)
	}
	p, _ := os.ReadFile(out)
	lines := strings.Split(strings.TrimSpace(string(p)), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[1], filepath.Join(other, "big.png")+",") {
		t.Errorf("predictions:\n%s\nwant a header and one row for big.png", p)
	}
}
