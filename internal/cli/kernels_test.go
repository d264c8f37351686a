package cli_test

import (
	"bytes"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	kernels_ "github.com/headroom-ml/headroom/kernels"
)

// Each convolution algorithm the backend can pick (Winograd's included),
// forced in turn and then measured, trains the cnn, the ResNet and the U-Net (every reference model
// with convolutions) with planned == measured and the
// rule's losses (within float32 rounding through 4 steps of Adam); a
// measured run writes its choices, and a second run of the same plan reads
// them and times nothing, as does a run with HEADROOM_KERNELS unset (measure
// is the default); a damaged choices file is refused before step 1,
// naming the file and line; one that cannot be written costs a warning.
func TestKernelChoices(t *testing.T) {
	if testing.Short() {
		t.Skip("builds headroom and trains 10 short runs")
	}
	bin := buildHeadroom(t)
	cache := filepath.Join(t.TempDir(), "choices.tsv")
	profile := filepath.Join(t.TempDir(), "instrs.txt")
	train := kernelRun(t, bin, cache, profile)
	for _, model := range []string{"cnn", "resnet", "unet"} {
		os.Remove(cache)
		checkModes(t, train, profile, model, "direct", "im2col", "winograd", "winograd4", "measure", "measure")
	}
	// the second measured run of each model read the file (made afresh for
	// each model): one more run of the last model times nothing, and the
	// file names its shapes
	r, msg := train("unet", "measure")
	if r == nil {
		t.Fatalf("unet measure again: %s", msg)
	}
	if r["kernel_shapes_timed"] != "0" {
		t.Errorf("a run of a plan already measured timed %s shapes, want 0", r["kernel_shapes_timed"])
	}
	// measuring is the default: with HEADROOM_KERNELS unset the run reads
	// the same file
	if r, msg := train("unet", ""); r == nil || r["kernels"] != "measure" || r["kernel_shapes_timed"] != "0" {
		t.Errorf("HEADROOM_KERNELS unset: %v %s; want kernels=measure and 0 shapes timed", r, msg)
	}
	// a choices file that cannot be written: the run trains, says so, and
	// keeps its choices in memory
	blocked := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(blocked, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "train", "--model", "cnn", "--dataset", "synthetic", "--epochs", "1", "--max-steps", "2",
		"--batch", "32", "--threads", "2")
	cmd.Env = append(os.Environ(), "HEADROOM_KERNELS=", "HEADROOM_KERNEL_CACHE="+filepath.Join(blocked, "choices.tsv"))
	out, err := cmd.CombinedOutput()
	if res := string(out); err != nil || !strings.Contains(res, "warning: the kernel choices file could not be read or written") ||
		!strings.Contains(res, blocked) || !strings.Contains(res, "kernels=measure") ||
		!strings.Contains(res, "kernels chosen by measurement (HEADROOM_KERNELS=rule times nothing): ") {
		t.Errorf("an unwritable choices file: %v\n%s\nwant a run with a warning naming %s", err, res, blocked)
	}
	b, err := os.ReadFile(cache)
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(string(b), "\n"); lines < 10 {
		t.Errorf("choices file has %d lines:\n%s", lines, b)
	}
	if err := os.WriteFile(cache, append(b, "x\ty\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	if r, msg := train("cnn", "measure"); r != nil || !strings.Contains(msg, cache) || !strings.Contains(msg, "line ") {
		t.Errorf("a damaged choices file: got %v, %q; want a refusal naming %s and the line", r, msg, cache)
	}
	if r, msg := train("cnn", "fft"); r != nil || !strings.Contains(msg, "HEADROOM_KERNELS") {
		t.Errorf("HEADROOM_KERNELS=fft: got %v, %q; want a refusal naming the variable", r, msg)
	}
}

// Two processes started together with one fresh choices file (ranks on
// one node, jobs started at once) take one choice per shape: between them
// they time each shape of the file once (one waits on the file's lock
// while the other measures, then reads its lines), and, the same run on
// the same choices, they end on the same loss to the last digit.
func TestKernelChoicesShared(t *testing.T) {
	if testing.Short() {
		t.Skip("builds headroom and trains two short runs at once")
	}
	bin := buildHeadroom(t)
	cache := filepath.Join(t.TempDir(), "choices.tsv")
	type out struct {
		r   map[string]string
		msg string
	}
	done := make(chan out, 2)
	for range 2 {
		go func() {
			cmd := exec.Command(bin, "train", "--model", "cnn", "--dataset", "synthetic", "--epochs", "1", "--max-steps", "4",
				"--batch", "32", "--threads", "2", "--quiet", "--seed", "3")
			cmd.Env = append(os.Environ(), "HEADROOM_KERNELS=", "HEADROOM_KERNEL_CACHE="+cache)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				done <- out{msg: stderr.String() + err.Error()}
				return
			}
			done <- out{msg: stdout.String()}
		}()
	}
	var rs []map[string]string
	for range 2 {
		o := <-done
		if !strings.Contains(o.msg, "RESULT") {
			t.Fatalf("a run failed: %s", o.msg)
		}
		rs = append(rs, result(t, o.msg))
	}
	b, err := os.ReadFile(cache)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Count(string(b), "\n") - 1 // less the header
	a, _ := strconv.Atoi(rs[0]["kernel_shapes_timed"])
	c, _ := strconv.Atoi(rs[1]["kernel_shapes_timed"])
	if lines < 5 || a+c != lines {
		t.Errorf("the two runs timed %d and %d shapes; the file has %d: want each shape timed once", a, c, lines)
	}
	if rs[0]["final_loss"] != rs[1]["final_loss"] {
		t.Errorf("final losses %s and %s: want the same bits from the same choices", rs[0]["final_loss"], rs[1]["final_loss"])
	}
}

// kernelRun returns a function that trains model for 4 steps at batch 32
// on 2 threads with HEADROOM_KERNELS=mode and the choices file cache,
// writing an --instr-profile table to profile, and returns its RESULT
// fields, or nil and the error.
func kernelRun(t *testing.T, bin, cache, profile string) func(model, mode string) (map[string]string, string) {
	datasets := map[string]string{"cnn": "synthetic", "resnet": "synthetic", "unet": "shapes", "mlp": "synthetic", "lstm": "go-src", "gpt": "go-src"}
	return func(model, mode string) (map[string]string, string) {
		t.Helper()
		cmd := exec.Command(bin, "train", "--model", model, "--dataset", datasets[model], "--epochs", "1", "--max-steps", "4",
			"--batch", "32", "--threads", "2", "--quiet", "--seed", "3", "--instr-profile", profile)
		cmd.Env = append(os.Environ(), "HEADROOM_KERNELS="+mode, "HEADROOM_KERNEL_CACHE="+cache)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			return nil, errb.String() + err.Error()
		}
		return result(t, out.String()), ""
	}
}

// TestMatMulChoices forces each matrix product algorithm the backend can
// pick in turn, and then measures, on the mlp, the lstm and the gpt (the
// reference models made of matrix products): planned == measured and the
// rule's plan, the rule's losses within float32 rounding, the profile's
// product rows naming their algorithm, and a second measured run timing
// nothing.
func TestMatMulChoices(t *testing.T) {
	if testing.Short() {
		t.Skip("builds headroom and trains 18 short runs")
	}
	bin := buildHeadroom(t)
	cache := filepath.Join(t.TempDir(), "choices.tsv")
	profile := filepath.Join(t.TempDir(), "instrs.txt")
	train := kernelRun(t, bin, cache, profile)
	for _, model := range []string{"mlp", "lstm", "gpt"} {
		os.Remove(cache)
		checkModes(t, train, profile, model, "packed1", "tiles", "tiles1", "measure", "measure")
		if r, _ := train(model, "measure"); r == nil || r["kernel_shapes_timed"] != "0" {
			t.Errorf("%s: a run of a plan already measured: %v, want 0 shapes timed", model, r)
		}
	}
}

// checkModes trains model with the rule and then with each of modes
// (train: kernelRun's), and checks each run against the rule's: the same
// plan and planned == measured, the final loss within float32 rounding
// through 4 steps of Adam, RESULT's kernels, and the profile's kernel
// columns (checkProfile).
func checkModes(t *testing.T, train func(model, mode string) (map[string]string, string), profile, model string, modes ...string) {
	t.Helper()
	base, msg := train(model, "rule")
	if base == nil {
		t.Fatalf("%s rule: %s", model, msg)
	}
	checkProfile(t, profile, model+" rule", "rule")
	want, _ := strconv.ParseFloat(base["final_loss"], 64)
	for _, mode := range modes {
		r, msg := train(model, mode)
		if r == nil {
			t.Fatalf("%s %s: %s", model, mode, msg)
		}
		if r["planned_peak_bytes"] != r["measured_peak_bytes"] || r["planned_peak_bytes"] != base["planned_peak_bytes"] {
			t.Errorf("%s %s: planned %s, measured %s; the rule's plan %s: want all equal", model, mode,
				r["planned_peak_bytes"], r["measured_peak_bytes"], base["planned_peak_bytes"])
		}
		got, _ := strconv.ParseFloat(r["final_loss"], 64)
		// Adam's first steps are near lr·sign(g) for every weight, so a
		// rounding that flips a tiny gradient's sign moves a weight a whole
		// step: the ResNet-20 with F(4×4, 3×3) on its 28×28×16 forward
		// products (a measured mix) has the rule's first loss to 7 digits
		// and a 4th-step loss 2.2e-3 from it; a wrong product is off from
		// step 1 (the kernel suite checks each against the definition)
		if d := math.Abs(got-want) / want; !(d < 1e-2) {
			t.Errorf("%s %s: final loss %v, the rule's %v (relative %.2g)", model, mode, got, want, d)
		}
		if r["kernels"] != mode {
			t.Errorf("%s %s: RESULT kernels=%s", model, mode, r["kernels"])
		}
		checkProfile(t, profile, model+" "+mode, mode)
		t.Logf("%s %s: final loss %s, choosing %ss, shapes timed %s", model, mode, r["final_loss"], r["kernel_choice_s"], r["kernel_shapes_timed"])
	}
}

// checkProfile checks an --instr-profile table: a row per instruction with
// its time, the convolutions' rows naming their kernel (the forced one
// where mode forces one), and a total.
func checkProfile(t *testing.T, path, run, mode string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%s: %v", run, err)
	}
	convs, kernels := 0, map[string]int{}
	products, mm := 0, map[string]int{}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	for _, l := range lines[1 : len(lines)-1] {
		f := strings.Fields(l)
		if len(f) >= 8 && f[1] == "matmul" {
			products++
			mm[f[len(f)-5]]++
			continue
		}
		if len(f) < 8 || !strings.HasPrefix(f[1], "conv2d") || strings.Contains(f[1], "transpose") {
			continue // not a convolution, or a transposed one (the input gradient's kernel, no choice)
		}
		convs++
		kernel := f[len(f)-5]
		kernels[kernel]++
		if ms, err := strconv.ParseFloat(f[len(f)-4], 64); err != nil || ms < 0 {
			t.Errorf("%s: row %q: time %q", run, l, f[len(f)-4])
		}
	}
	if convs+products == 0 || !strings.Contains(lines[len(lines)-1], "total") {
		t.Errorf("%s: %d convolution and %d product rows, last line %q", run, convs, products, lines[len(lines)-1])
	}
	// the products: packed (or prepacked, sharing one packing of their
	// weight) but where a product algorithm is forced (and offered), any
	// of them when measured
	offered, err := kernels_.ParseMatMulAlgo(mode)
	if err != nil {
		offered = kernels_.MatMulPacked
	}
	switch {
	case mode == "measure":
		if mm["packed"]+mm["packed1"]+mm["tiles"]+mm["tiles1"]+mm["prepacked"] != products {
			t.Errorf("%s: product kernels %v over %d products", run, mm, products)
		}
	case mode == "packed1" || mode == "tiles" || mode == "tiles1":
		// the mlp, the lstm and the gpt hold products of 32 rows by 1024
		// columns: the forced algorithm runs some where this machine offers it
		can := slices.Contains(kernels_.MatMulAlgos(32, 1024, 256, false, false, false, 2), offered)
		if mm[mode]+mm["packed"] != products || can && mm[mode] == 0 || !can && mm[mode] > 0 {
			t.Errorf("%s: product kernels %v over %d products (%s offered: %v)", run, mm, products, mode, can)
		}
	default:
		if mm["packed"]+mm["prepacked"] != products {
			t.Errorf("%s: product kernels %v, want packed or prepacked for all %d products", run, mm, products)
		}
	}
	// the lstm's 127 recurrent products and their 127 input gradients
	// share packings of the recurrent kernel, but where an algorithm is
	// forced; no other reference model repeats a weight so
	want := 0
	if strings.HasPrefix(run, "lstm ") && (mode == "measure" || offered == kernels_.MatMulPacked) {
		want = 2 * 127
	}
	if mm["prepacked"] != want {
		t.Errorf("%s: %d products prepacked, want %d", run, mm["prepacked"], want)
	}
	if convs == 0 {
		return
	}
	switch mode {
	case "im2col":
		if kernels["im2col"] != convs {
			t.Errorf("%s: kernels %v, want im2col for all %d convolutions", run, kernels, convs)
		}
	case "direct", "rule", "winograd", "winograd4":
		wg := kernels["winograd"] + kernels["winograd4"]
		if kernels["direct"]+kernels["im2col"]+wg != convs || kernels[mode] == 0 && mode != "rule" ||
			wg != kernels[mode] && strings.HasPrefix(mode, "winograd") || wg > 0 && !strings.HasPrefix(mode, "winograd") {
			t.Errorf("%s: kernels %v over %d convolutions", run, kernels, convs)
		}
	case "measure":
		if kernels["direct"]+kernels["im2col"]+kernels["winograd"]+kernels["winograd4"] != convs {
			t.Errorf("%s: kernels %v over %d convolutions", run, kernels, convs)
		}
	}
}
