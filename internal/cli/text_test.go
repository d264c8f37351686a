package cli_test

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// textFile writes n bytes of Go-like text into a temporary file.
func textFile(t *testing.T, n int) string {
	t.Helper()
	words := []string{"func ", "main", "() {\n", "\treturn ", "x", " := ", "if ", "err != nil", " {\n", "}\n", "for ", "i++", "\n"}
	var b []byte
	for i := 0; len(b) < n; i++ {
		b = append(b, words[(i*7+i/3)%len(words)]...)
	}
	path := filepath.Join(t.TempDir(), "code.go")
	if err := os.WriteFile(path, b[:n], 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestTrainTextSaveAndGenerate trains a gpt for a few steps on a text
// file, saves it and samples from it: RESULT carries the language model's
// fields (val_bpb is val_loss in bits) and the plan equals the measured
// peak; generate prints its inference plan and the prompt's continuation.
func TestTrainTextSaveAndGenerate(t *testing.T) {
	text := textFile(t, 6000)
	model := filepath.Join(t.TempDir(), "gpt.safetensors")
	status, stdout, stderr := run(t, "train", "--model", "gpt", "--text", text, "--seq", "16", "--batch", "4", "--max-steps", "3",
		"--threads", "1", "--save", model)
	if status != 0 {
		t.Fatalf("train: status %d: %s", status, stderr)
	}
	r := result(t, stdout)
	for _, k := range []string{"param_count", "tokens_per_sec", "val_loss", "val_bpb", "seq", "planned_peak_bytes", "measured_peak_bytes"} {
		if r[k] == "" {
			t.Errorf("RESULT lacks %s: %v", k, r)
		}
	}
	// 875,520 at --seq 128, less the 112 positions of 128 not needed at 16
	if want := strconv.Itoa(875520 - 112*128); r["param_count"] != want {
		t.Errorf("param_count %s, want %s", r["param_count"], want)
	}
	loss, _ := strconv.ParseFloat(r["val_loss"], 64)
	bpb, _ := strconv.ParseFloat(r["val_bpb"], 64)
	if !(loss > 0) || math.Abs(bpb-loss/math.Ln2) > 1e-3 {
		t.Errorf("val_loss %v, val_bpb %v: want positive, bpb = loss / ln 2", loss, bpb)
	}
	if r["planned_peak_bytes"] != r["measured_peak_bytes"] {
		t.Errorf("planned %s, measured %s", r["planned_peak_bytes"], r["measured_peak_bytes"])
	}

	status, stdout, stderr = run(t, "generate", "--load", model, "--prompt", "func ", "--bytes", "40", "--threads", "1", "--seed", "3")
	if status != 0 {
		t.Fatalf("generate: status %d: %s", status, stderr)
	}
	if !strings.Contains(stdout, "inference plan") || !strings.Contains(stdout, "optimizer state 0 B, saved activations 0 B") {
		t.Errorf("generate printed no inference plan without optimizer state and activations:\n%s", stdout)
	}
	var text40 string
	for _, l := range strings.SplitAfter(stdout, "\n") {
		if strings.HasPrefix(l, "func ") {
			text40 = stdout[strings.Index(stdout, l):]
			break
		}
	}
	if len(text40) < len("func ")+40 {
		t.Errorf("generate printed no continuation of the prompt:\n%s", stdout)
	}
	_, again, _ := run(t, "generate", "--load", model, "--prompt", "func ", "--bytes", "40", "--threads", "1", "--seed", "3", "--quiet")
	if !strings.HasPrefix(again, "func ") || !strings.Contains(stdout, again) {
		t.Errorf("the same seed sampled other text:\n%q\n%q", again, stdout)
	}
}

// TestPlanTextIsLinear: doubling the window less than doubles the plan's
// peak plus a margin (no T×T buffer), as `headroom plan --seq` reports it.
func TestPlanTextIsLinear(t *testing.T) {
	text := textFile(t, 5000)
	peak := func(seq string) float64 {
		status, stdout, stderr := run(t, "plan", "--model", "gpt", "--text", text, "--batch", "2", "--seq", seq, "--json", "--threads", "1")
		if status != 0 {
			t.Fatalf("plan: status %d: %s", status, stderr)
		}
		var r struct {
			Peak int64 `json:"peak_bytes"`
			Seq  int   `json:"seq"`
		}
		if err := json.Unmarshal([]byte(stdout), &r); err != nil || r.Seq == 0 {
			t.Fatalf("plan --json: %v (seq %d):\n%s", err, r.Seq, stdout)
		}
		return float64(r.Peak)
	}
	a, b := peak("512"), peak("1024")
	if b/a > 2.3 {
		t.Errorf("peak %.0f B at --seq 512, %.0f B at 1024: ratio %.2f, want <= 2.3", a, b, b/a)
	}
}

// TestGenerateNeedsALanguageModel: a file without the language model's
// metadata is refused, naming what is missing.
func TestGenerateNeedsALanguageModel(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.safetensors")
	status, _, stderr := run(t, "train", "--epochs", "1", "--threads", "1", "--quiet", "--save", path)
	if status != 0 {
		t.Fatalf("train: %s", stderr)
	}
	status, _, stderr = run(t, "generate", "--load", path)
	if status == 0 || !strings.Contains(stderr, "holds no language model") || !strings.Contains(stderr, path) {
		t.Errorf("generate on a classifier's weights: status %d, stderr %q; want an error saying the file holds no language model", status, stderr)
	}
}

// TestBuckets: --buckets trains a text's lines batched by length (planned
// equals measured, with every bucket in the one reservation), and plan
// prints each bucket's peak alone and, under a budget, the longest window
// that fits; --buckets without a text, or with a --seq that is not its
// largest, is a usage error.
func TestBuckets(t *testing.T) {
	text := textFile(t, 20000)
	status, out, stderr := run(t, "train", "--text", text, "--buckets", "16,32,64", "--batch", "8", "--max-steps", "6", "--threads", "1")
	if status != 0 {
		t.Fatalf("train --buckets: status %d\n%s%s", status, out, stderr)
	}
	if !strings.Contains(out, "seq=64") || resultValue(t, out, "planned_peak_bytes") != resultValue(t, out, "measured_peak_bytes") {
		t.Errorf("want seq=64 (the largest bucket) and planned == measured:\n%s", out)
	}
	status, out, stderr = run(t, "plan", "--text", text, "--buckets", "16,32,64", "--batch", "8", "--budget", "256MiB", "--json")
	if status != 0 {
		t.Fatalf("plan --buckets: status %d\n%s%s", status, out, stderr)
	}
	var r struct {
		Peak    int64 `json:"peak_bytes"`
		Buckets []struct {
			Length int   `json:"length"`
			Peak   int64 `json:"peak_bytes"`
		} `json:"buckets"`
		Longest *int `json:"longest_seq_for_budget"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(r.Buckets) != 3 || r.Buckets[0].Length != 16 || r.Buckets[2].Length != 64 {
		t.Fatalf("buckets %+v, want 16, 32 and 64", r.Buckets)
	}
	for i, b := range r.Buckets {
		if b.Peak <= 0 || b.Peak > r.Peak || i > 0 && b.Peak <= r.Buckets[i-1].Peak {
			t.Errorf("bucket %d peaks at %d B alone (the run %d B): want a growing peak within the run's", b.Length, b.Peak, r.Peak)
		}
	}
	if r.Longest == nil || *r.Longest < 64 {
		t.Errorf("longest window for 256MiB: %v, want at least the largest bucket, 64 (its run fits)", r.Longest)
	}
	for _, args := range [][]string{{"--buckets", "16,32"}, {"--text", text, "--buckets", "16,32", "--seq", "64"}, {"--text", text, "--buckets", "0,8"}} {
		if status, _, stderr := run(t, append([]string{"plan"}, args...)...); status != 2 {
			t.Errorf("plan %v: status %d (%s), want 2 (a usage error)", args, status, strings.TrimSpace(stderr))
		}
	}
}

// resultValue returns a RESULT line's value of key.
func resultValue(t *testing.T, out, key string) string {
	t.Helper()
	for _, f := range strings.Fields(out[strings.LastIndex(out, "RESULT "):]) {
		if v, ok := strings.CutPrefix(f, key+"="); ok {
			return v
		}
	}
	t.Fatalf("no %s= in the RESULT line:\n%s", key, out)
	return ""
}
