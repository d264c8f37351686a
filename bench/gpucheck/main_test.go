package main

import (
	"bytes"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/headroom-ml/headroom/train"
)

// checkEmulated runs `gpucheck -emulated` with args on small models and
// returns whether it passed and what it printed.
func checkEmulated(t *testing.T, plant func(*train.Config), args ...string) (bool, string) {
	t.Helper()
	o, err := parseFlags(append([]string{"-emulated", "-threads", "1"}, args...), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	o.log = testLog{t}
	o.plant = plant
	var out bytes.Buffer
	ok, err := run(&out, o)
	if err != nil {
		t.Fatalf("gpucheck %v: %v\n%s", args, err, out.String())
	}
	return ok, out.String()
}

// The hardware check, run on the emulated GPU (the backend's launches in
// the PTX interpreter) with the small cnn (the cheapest to interpret; the
// mlp, gpt and resnet pass too: `go run ./bench/gpucheck -emulated -steps 3`, a
// few minutes): every correctness check passes, and the table has its row
// with PyTorch's figures beside headroom's.
func TestEmulatedCheckPasses(t *testing.T) {
	torch := t.TempDir() + "/torch.jsonl"
	lines := `{"model":"cnn","mode":"eager","samples_per_sec":1e9,"peak_bytes":1,"torch":"2.11"}
{"model":"cnn","mode":"compile","error":"no triton"}
`
	if err := writeFile(torch, lines); err != nil {
		t.Fatal(err)
	}
	ok, out := checkEmulated(t, nil, "-models", "cnn", "-steps", "3", "-torch", torch)
	t.Log("\n" + out)
	if !ok {
		t.Fatal("the check failed on the emulated GPU")
	}
	for _, want := range []string{"| cnn | ", "every correctness check passed",
		"target cnn: samples/s ÷ torch eager's", "missed", "torch compile cnn: no triton"} {
		if !strings.Contains(out, want) {
			t.Errorf("the output has no %q", want)
		}
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "| ") && !strings.HasPrefix(line, "| model") && !strings.HasPrefix(line, "| ---") {
			if !strings.HasSuffix(line, "| ok |") || !strings.Contains(line, "| yes |") {
				t.Errorf("row %q: want the OOM check passed and the result ok", line)
			}
		}
	}
}

// A planted difference (the GPU run from another seed) must fail the
// check: it compares the weights, it does not assume them.
func TestEmulatedCheckCatchesPlantedDifference(t *testing.T) {
	ok, out := checkEmulated(t, func(c *train.Config) { c.Seed++ }, "-models", "cnn", "-steps", "2")
	t.Log("\n" + out)
	if ok {
		t.Fatal("a GPU run from another seed passed the check")
	}
	if !strings.Contains(out, "FAIL cnn: weights differ from the host's") {
		t.Error("the output does not say that the weights differ")
	}
}

func TestWeightsDiff(t *testing.T) {
	a := map[string][]float64{"w": {1, -2, 4}, "b": {0, 0}}
	for _, tc := range []struct {
		name string
		b    map[string][]float64
		want float64
	}{
		{"same", map[string][]float64{"w": {1, -2, 4}, "b": {0, 0}}, 0},
		{"relative to the largest", map[string][]float64{"w": {1, -2.004, 4}, "b": {0, 0}}, 0.001},
		{"near zero: relative to the floor", map[string][]float64{"w": {1, -2, 4}, "b": {0, 2e-7}}, 2e-4},
		{"NaN", map[string][]float64{"w": {1, math.NaN(), 4}, "b": {0, 0}}, math.Inf(1)},
		{"missing", map[string][]float64{"w": {1, -2, 4}}, math.Inf(1)},
		{"shorter", map[string][]float64{"w": {1, -2}, "b": {0, 0}}, math.Inf(1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := weightsDiff(a, tc.b)
			if math.Abs(got-tc.want) > 1e-12 && !(math.IsInf(got, 1) && math.IsInf(tc.want, 1)) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestParseTorch(t *testing.T) {
	got, err := parseTorch(strings.NewReader(`{"model":"gpt","mode":"eager","samples_per_sec":12.5,"peak_bytes":1024}

{"model":"gpt","mode":"compile","samples_per_sec":20}`), "t")
	if err != nil {
		t.Fatal(err)
	}
	if got["gpt"]["eager"].PeakBytes != 1024 || got["gpt"]["compile"].SamplesPerSec != 20 {
		t.Errorf("got %+v", got)
	}
	// lines as scripts/gpu_check_torch.py writes them (its smoke run on a CPU)
	real, err := readTorch("testdata/torch.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if r := real["mlp"]; r["eager"].SamplesPerSec <= 0 || r["compile"].Error == "" {
		t.Errorf("testdata/torch.jsonl: got %+v", r)
	}
	for _, bad := range []string{`{"model":"gpt"}`, `{"mode":"eager"}`, `not json`} {
		if _, err := parseTorch(strings.NewReader(bad), "t"); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// A row with a problem fails the table; one without passes.
func TestPrintTable(t *testing.T) {
	var out bytes.Buffer
	if !printTable(&out, []*row{{model: "mlp", oom: "yes"}}) {
		t.Errorf("a row without problems failed:\n%s", out.String())
	}
	out.Reset()
	if printTable(&out, []*row{{model: "mlp"}, {model: "cnn", problems: []string{"device ledger peak 2 B, plan 1 B"}}}) {
		t.Errorf("a row with a problem passed:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "FAIL cnn: device ledger peak") {
		t.Errorf("the problem is not printed:\n%s", out.String())
	}
}

func FuzzParseTorch(f *testing.F) {
	f.Add(`{"model":"mlp","mode":"eager","samples_per_sec":1,"peak_bytes":2}`)
	f.Add("\n\n{}")
	f.Fuzz(func(t *testing.T, s string) {
		got, err := parseTorch(strings.NewReader(s), "fuzz")
		if err != nil {
			return
		}
		for model, modes := range got {
			for mode, r := range modes {
				if r.Model != model || r.Mode != mode || (mode != "eager" && mode != "compile") {
					t.Fatalf("%q: %s/%s holds %+v", s, model, mode, r)
				}
			}
		}
	})
}

func writeFile(path, s string) error { return os.WriteFile(path, []byte(s), 0o644) }

// testLog writes to the test's log.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
