package cli_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/headroom-ml/headroom/datasets"
	"github.com/headroom-ml/headroom/internal/cli"
	"github.com/headroom-ml/headroom/nn"
)

// run calls cli.Main and returns the exit status, stdout and stderr.
func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	status := cli.Main(args, &out, &errb)
	for _, s := range []string{out.String(), errb.String()} {
		for _, bad := range []string{"goroutine ", "panic", "internal error"} {
			if strings.Contains(s, bad) {
				t.Errorf("headroom %s: output contains %q:\n%s", strings.Join(args, " "), bad, s)
			}
		}
	}
	return status, out.String(), errb.String()
}

// resultFields are keys the RESULT line must have (it may have more).
var resultFields = []string{"engine", "model", "data", "threads", "batch", "samples_per_sec", "steps",
	"first_loss", "final_loss", "train_s", "test_acc", "planned_peak_bytes", "measured_peak_bytes",
	"ledger_growth_bytes", "peak_rss_mib"}

// result finds the single RESULT line in stdout and returns its
// key=value fields.
func result(t *testing.T, stdout string) map[string]string {
	t.Helper()
	var lines []string
	for _, l := range strings.Split(stdout, "\n") {
		if strings.HasPrefix(l, "RESULT ") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 {
		t.Fatalf("got %d RESULT lines, want 1:\n%s", len(lines), stdout)
	}
	m := map[string]string{}
	for _, f := range strings.Fields(strings.TrimPrefix(lines[0], "RESULT ")) {
		k, v, ok := strings.Cut(f, "=")
		if !ok || k == "" || v == "" {
			t.Fatalf("RESULT field %q is not key=value: %s", f, lines[0])
		}
		if _, dup := m[k]; dup {
			t.Fatalf("RESULT has %s twice: %s", k, lines[0])
		}
		m[k] = v
	}
	for _, k := range resultFields {
		if _, ok := m[k]; !ok {
			t.Fatalf("RESULT lacks %s=: %s", k, lines[0])
		}
	}
	return m
}

func num(t *testing.T, r map[string]string, key string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(r[key], 64)
	if err != nil || math.IsNaN(v) {
		t.Fatalf("RESULT %s=%q: not a number", key, r[key])
	}
	return v
}

func integer(t *testing.T, r map[string]string, key string) int64 {
	t.Helper()
	v, err := strconv.ParseInt(r[key], 10, 64)
	if err != nil {
		t.Fatalf("RESULT %s=%q: not an integer", key, r[key])
	}
	return v
}

func TestTrainDefault(t *testing.T) {
	status, stdout, stderr := run(t, "train")
	if status != 0 {
		t.Fatalf("headroom train: status %d, stderr:\n%s", status, stderr)
	}
	if stderr != "" {
		t.Errorf("stderr not empty:\n%s", stderr)
	}
	// the plan comes before the first epoch, the RESULT line last
	planAt := strings.Index(stdout, "memory plan (known before step 1)")
	epochAt := strings.Index(stdout, "epoch 1/20")
	if planAt < 0 || epochAt < 0 || planAt > epochAt {
		t.Errorf("want the memory plan (at %d) before epoch 1 (at %d):\n%s", planAt, epochAt, stdout)
	}
	lines := strings.Split(strings.TrimRight(stdout, "\n"), "\n")
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "RESULT ") {
		t.Errorf("last line %q, want the RESULT line", last)
	}
	if n := strings.Count(stdout, "\nepoch "); n != 20 {
		t.Errorf("got %d epoch lines, want 20 (the default on digits)", n)
	}

	r := result(t, stdout)
	for k, want := range map[string]string{"engine": "headroom", "model": "small", "data": "digits", "batch": "32"} {
		if r[k] != want {
			t.Errorf("RESULT %s=%s, want %s", k, r[k], want)
		}
	}
	trainSet, _, err := datasets.Digits()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := integer(t, r, "steps"), int64(20*((trainSet.N+31)/32)); got != want {
		t.Errorf("steps=%d, want 20 epochs × ⌈%d/32⌉ = %d", got, trainSet.N, want)
	}
	if integer(t, r, "threads") <= 0 {
		t.Errorf("threads=%s", r["threads"])
	}
	for _, k := range []string{"samples_per_sec", "first_loss", "final_loss", "train_s", "peak_rss_mib"} {
		if v := num(t, r, k); v <= 0 || math.IsInf(v, 0) {
			t.Errorf("RESULT %s=%v, want positive and finite", k, v)
		}
	}
	if first, final := num(t, r, "first_loss"), num(t, r, "final_loss"); !(final < first/5) {
		t.Errorf("loss went from %v to %v, want at least 5x lower", first, final)
	}
	if acc := num(t, r, "test_acc"); acc < 0.95 || acc > 1 {
		t.Errorf("test_acc=%v, want >= 0.95", acc)
	}
	planned, measured := integer(t, r, "planned_peak_bytes"), integer(t, r, "measured_peak_bytes")
	if planned <= 0 || planned != measured {
		t.Errorf("planned_peak_bytes=%d, measured_peak_bytes=%d: want equal and positive", planned, measured)
	}
	if g := integer(t, r, "ledger_growth_bytes"); g != 0 {
		t.Errorf("ledger_growth_bytes=%d, want 0", g)
	}

	// `plan` predicts the same peak for the same run
	status, planOut, stderr := run(t, "plan", "--json")
	if status != 0 {
		t.Fatalf("headroom plan --json: status %d: %s", status, stderr)
	}
	p := decodePlan(t, planOut)
	if p["peak_bytes"] != planned {
		t.Errorf("plan peak_bytes=%d, train planned_peak_bytes=%d: want equal", p["peak_bytes"], planned)
	}
}

// planKeys are the integer fields `plan --json` must have.
var planKeys = []string{"param_count", "params_bytes", "grads_bytes", "optstate_bytes", "activations_bytes",
	"workspace_bytes", "input_bytes", "peak_bytes"}

// decodePlan parses `plan --json` output and returns its integer fields
// (planKeys, and max_batch_for_budget, -1 when absent).
func decodePlan(t *testing.T, s string) map[string]int64 {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var raw map[string]any
	if err := dec.Decode(&raw); err != nil {
		t.Fatalf("plan --json output is not JSON: %v\n%s", err, s)
	}
	if dec.More() {
		t.Fatalf("plan --json printed more than one JSON value:\n%s", s)
	}
	out := map[string]int64{"max_batch_for_budget": -1}
	for _, k := range append(planKeys, "max_batch_for_budget", "plan_budget_bytes") {
		v, ok := raw[k]
		if !ok {
			if k != "max_batch_for_budget" && k != "plan_budget_bytes" {
				t.Errorf("plan --json lacks %q", k)
			}
			continue
		}
		n, ok := v.(json.Number)
		if !ok {
			t.Errorf("plan --json %q = %v (%T), want an integer", k, v, v)
			continue
		}
		i, err := n.Int64()
		if err != nil {
			t.Errorf("plan --json %q = %v, want an integer", k, n)
		}
		out[k] = i
	}
	return out
}

func TestPlanJSON(t *testing.T) {
	status, stdout, stderr := run(t, "plan", "--json")
	if status != 0 {
		t.Fatalf("status %d: %s", status, stderr)
	}
	p := decodePlan(t, stdout)
	if p["max_batch_for_budget"] != -1 {
		t.Errorf("max_batch_for_budget present without --budget")
	}
	// the small model on 8x8 digits: 64·128+128 + 128·10+10
	m, err := nn.ModelByName("small", []int{8, 8, 1}, 10)
	if err != nil {
		t.Fatal(err)
	}
	_, params, err := m.Summary()
	if err != nil {
		t.Fatal(err)
	}
	if p["param_count"] != int64(params) || params != 64*128+128+128*10+10 {
		t.Errorf("param_count %d, want %d", p["param_count"], params)
	}
	// float32 weights, each variable rounded up to 64 bytes (4 variables)
	if pb := p["params_bytes"]; pb < 4*int64(params) || pb > 4*int64(params)+4*64 {
		t.Errorf("params_bytes %d, want 4 × %d params (+ alignment)", pb, params)
	}
	if p["optstate_bytes"] != 2*p["params_bytes"] {
		t.Errorf("optstate_bytes %d, want 2 × params_bytes %d (Adam's m and v)", p["optstate_bytes"], p["params_bytes"])
	}
	sum := int64(0)
	for _, k := range planKeys[1:7] {
		if p[k] < 0 {
			t.Errorf("%s = %d, want >= 0", k, p[k])
		}
		sum += p[k]
	}
	if p["peak_bytes"] != sum {
		t.Errorf("peak_bytes %d, want the sum of the categories %d", p["peak_bytes"], sum)
	}
	for _, k := range []string{"activations_bytes", "input_bytes"} {
		if p[k] <= 0 {
			t.Errorf("%s = %d, want > 0", k, p[k])
		}
	}

	// the text form says the same
	status, text, _ := run(t, "plan")
	if status != 0 || !strings.Contains(text, fmt.Sprintf("%d parameters", params)) ||
		!regexp.MustCompile(fmt.Sprintf(`(?m)^\s*peak\s+%d B`, p["peak_bytes"])).MatchString(text) {
		t.Errorf("plan text (status %d) lacks the parameter count or the peak:\n%s", status, text)
	}
}

// A batch larger than the training set plans (and trains) one step over the
// whole set, as Keras does; the plan says so rather than printing a batch
// its peak does not describe.
func TestPlanBatchOverTrainingSet(t *testing.T) {
	_, whole, _ := run(t, "plan", "--json", "--batch", "1437")
	_, over, _ := run(t, "plan", "--json", "--batch", "100000")
	if w, o := decodePlan(t, whole), decodePlan(t, over); w["peak_bytes"] != o["peak_bytes"] {
		t.Errorf("peak %d for batch 100000, want %d (the 1437 digits)", o["peak_bytes"], w["peak_bytes"])
	}
	if !strings.Contains(over, `"step_batch": 1437`) || strings.Contains(whole, "step_batch") {
		t.Errorf("step_batch should be 1437 for batch 100000 and absent for 1437:\n%s\n%s", over, whole)
	}
	if _, text, _ := run(t, "plan", "--batch", "100000"); !strings.Contains(text, "1437 examples: a step holds all of them") {
		t.Errorf("plan text does not say the step holds the whole set:\n%s", text)
	}
}

// processOverhead is what a --budget leaves the process itself (budget.go).
const processOverhead = 32 << 20

// With --budget (the whole process's), plan names the largest batch whose
// plan fits what the budget leaves beside the process itself: it fits, and
// one more does not.
func TestPlanMaxBatchForBudget(t *testing.T) {
	for _, tc := range []struct{ model, budget string }{{"cnn", "34304KiB"}, {"small", "33368KiB"}} {
		t.Run(tc.model, func(t *testing.T) {
			budget := parseMiB(t, tc.budget) - processOverhead
			status, stdout, stderr := run(t, "plan", "--json", "--model", tc.model, "--budget", tc.budget)
			if status != 0 {
				t.Fatalf("status %d: %s", status, stderr)
			}
			if got := decodePlan(t, stdout)["plan_budget_bytes"]; got != budget {
				t.Errorf("plan_budget_bytes %d, want --budget less the process's %d: %d", got, processOverhead, budget)
			}
			n := decodePlan(t, stdout)["max_batch_for_budget"]
			if n <= 0 {
				t.Fatalf("max_batch_for_budget = %d, want a batch size > 0", n)
			}
			peak := func(b int64) int64 {
				status, out, stderr := run(t, "plan", "--json", "--model", tc.model, "--batch", fmt.Sprint(b))
				if status != 0 {
					t.Fatalf("plan --batch %d: status %d: %s", b, status, stderr)
				}
				return decodePlan(t, out)["peak_bytes"]
			}
			if p := peak(n); p > budget {
				t.Errorf("batch %d: peak %d B > budget %d B", n, p, budget)
			}
			trainSet, _, err := datasets.Digits()
			if err != nil {
				t.Fatal(err)
			}
			if n >= int64(trainSet.N) {
				return // every batch up to the data set's size fits
			}
			if p := peak(n + 1); p <= budget {
				t.Errorf("batch %d: peak %d B also fits the budget %d B; max_batch_for_budget said %d", n+1, p, budget, n)
			}
		})
	}
}

func parseMiB(t *testing.T, s string) int64 {
	t.Helper()
	switch {
	case strings.HasSuffix(s, "MiB"):
		v, err := strconv.ParseInt(strings.TrimSuffix(s, "MiB"), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return v << 20
	case strings.HasSuffix(s, "KiB"):
		v, err := strconv.ParseInt(strings.TrimSuffix(s, "KiB"), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return v << 10
	}
	t.Fatalf("bad size %q", s)
	return 0
}

var fitsRE = regexp.MustCompile(`batch (\d+) fits`)

// A run that cannot fit its budget fails before step 1 with the memory it
// needs and a batch size that fits; that batch then trains within budget.
// (--budget is the whole process's: 32 MiB of it is left to the process
// itself, 1.5 MiB to the plan.)
func TestTrainOverBudget(t *testing.T) {
	status, stdout, stderr := run(t, "train", "--model", "cnn", "--dataset", "digits", "--batch", "512", "--budget", "34304KiB")
	if status == 0 {
		t.Fatalf("status 0, want a failure:\n%s", stdout)
	}
	if strings.Contains(stdout, "RESULT") || strings.Contains(stdout, "epoch 1/") {
		t.Errorf("the run started training:\n%s", stdout)
	}
	if !strings.HasPrefix(stderr, "headroom: ") {
		t.Errorf("stderr does not start with the error:\n%s", stderr)
	}
	needs := regexp.MustCompile(`batch 512 needs \d+(\.\d+)? (B|KiB|MiB|GiB)`)
	for _, re := range []*regexp.Regexp{needs, regexp.MustCompile(`budget (of )?1\.50 MiB`), fitsRE} {
		if !re.MatchString(stderr) {
			t.Errorf("stderr does not match %q:\n%s", re, stderr)
		}
	}
	// a budget nothing fits says so
	status, _, tiny := run(t, "train", "--model", "cnn", "--budget", "32832KiB")
	if status == 0 || !strings.Contains(tiny, "not even batch 1 fits") {
		t.Errorf("budget 32 MiB + 64 KiB: status %d, stderr:\n%s\nwant a failure saying no batch fits", status, tiny)
	}
	status, _, none := run(t, "train", "--model", "cnn", "--budget", "16MiB")
	if status == 0 || !strings.Contains(none, "the process itself needs") {
		t.Errorf("budget 16MiB: status %d, stderr:\n%s\nwant a failure saying the process alone needs more", status, none)
	}

	m := fitsRE.FindStringSubmatch(stderr)
	if m == nil {
		return
	}
	status, stdout, stderr = run(t, "train", "--model", "cnn", "--batch", m[1], "--budget", "34304KiB", "--epochs", "1", "--quiet")
	if status != 0 {
		t.Fatalf("the suggested batch %s: status %d: %s", m[1], status, stderr)
	}
	r := result(t, stdout)
	if planned, measured := integer(t, r, "planned_peak_bytes"), integer(t, r, "measured_peak_bytes"); measured > 1536<<10 || planned != measured {
		t.Errorf("batch %s: planned %d B, measured %d B; want equal and within 1.5 MiB", m[1], planned, measured)
	}
}

// Every mistake in an invocation is one line on stderr, starting with
// "headroom: ", and a non-zero status.
func TestBadInvocations(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"unknown_model", []string{"train", "--model", "resnet"}, []string{"resnet", "small", "mlp", "cnn"}},
		{"unknown_dataset", []string{"train", "--dataset", "imagenet"}, []string{"imagenet", "digits", "fashion-mnist"}},
		{"unknown_optimizer", []string{"train", "--optimizer", "rmsprop"}, []string{"rmsprop", "adam", "sgd"}},
		{"missing_fashion_mnist", []string{"train", "--dataset", "fashion-mnist", "--data-dir", "/nonexistent"},
			[]string{"/nonexistent/", "dataset-fashion-mnist", "--data-dir"}},
		{"plan_missing_fashion_mnist", []string{"plan", "--dataset", "fashion-mnist", "--data-dir", "/nonexistent"},
			[]string{"/nonexistent/", "dataset-fashion-mnist"}},
		{"bad_budget", []string{"train", "--budget", "lots"}, []string{"--budget", "lots"}},
		{"negative_batch", []string{"train", "--batch", "-1"}, []string{"--batch"}},
		{"resume_without_dir", []string{"train", "--resume"}, []string{"--resume", "--checkpoint-dir"}},
		{"extra_argument", []string{"train", "extra"}, []string{"extra"}},
		{"plan_extra_argument", []string{"plan", "--json", "more"}, []string{"more"}},
		{"plan_unknown_model", []string{"plan", "--model", "vgg"}, []string{"vgg"}},
		{"nan_lr", []string{"train", "--lr", "NaN"}, []string{"--lr", "NaN"}},
		{"negative_lr", []string{"train", "--lr", "-0.1"}, []string{"--lr", "-0.1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, stdout, stderr := run(t, tc.args...)
			if status == 0 {
				t.Fatalf("status 0, want non-zero; stdout:\n%s", stdout)
			}
			if strings.Contains(stdout, "RESULT") {
				t.Errorf("printed a RESULT line:\n%s", stdout)
			}
			lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
			if len(lines) != 1 {
				t.Errorf("stderr has %d lines, want 1:\n%s", len(lines), stderr)
			}
			if !strings.HasPrefix(lines[0], "headroom: ") {
				t.Errorf("stderr %q does not start with \"headroom: \"", lines[0])
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr does not mention %q:\n%s", w, stderr)
				}
			}
		})
	}
}

// A bad flag is reported once (the flag package's own message and usage
// may come with it, but the mistake is stated on one line, not repeated).
func TestBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		word string
	}{
		{[]string{"train", "--bogus"}, "bogus"},
		{[]string{"plan", "--bogus"}, "bogus"},
		{[]string{"train", "--epochs", "abc"}, "abc"},
	} {
		t.Run(strings.Join(tc.args, "_"), func(t *testing.T) {
			status, _, stderr := run(t, tc.args...)
			if status == 0 {
				t.Fatal("status 0, want non-zero")
			}
			n := 0
			for _, l := range strings.Split(stderr, "\n") {
				if strings.Contains(l, tc.word) {
					n++
				}
			}
			if n != 1 {
				t.Errorf("%d lines of stderr mention %q, want 1:\n%s", n, tc.word, stderr)
			}
		})
	}
}

func TestUsage(t *testing.T) {
	status, _, stderr := run(t)
	if status != 2 || !strings.Contains(stderr, "headroom train") || !strings.Contains(stderr, "headroom plan") {
		t.Errorf("no arguments: status %d, stderr:\n%s\nwant 2 and the usage", status, stderr)
	}
	status, stdout, _ := run(t, "help")
	if status != 0 || !strings.Contains(stdout, "headroom train") {
		t.Errorf("help: status %d, stdout:\n%s\nwant 0 and the usage", status, stdout)
	}
	status, _, stderr = run(t, "frob")
	if status != 2 || !strings.HasPrefix(stderr, `headroom: unknown command "frob"`) {
		t.Errorf("unknown command: status %d, stderr:\n%s", status, stderr)
	}
	for _, cmd := range []string{"train", "plan"} {
		status, stdout, stderr := run(t, cmd, "-h")
		if status != 0 || !strings.Contains(stdout+stderr, "-batch") || !strings.Contains(stdout+stderr, "-budget") {
			t.Errorf("%s -h: status %d, output:\n%s%s\nwant 0 and the flags", cmd, status, stdout, stderr)
		}
	}
}

// Training 2 epochs straight and 1 epoch, then resuming to 2 from the
// checkpoint, end at the same loss, bit for bit (as printed).
func TestCheckpointResume(t *testing.T) {
	dirA, dirB := t.TempDir(), t.TempDir()
	csvPath := filepath.Join(t.TempDir(), "log.csv")
	train := func(args ...string) (map[string]string, string) {
		t.Helper()
		args = append([]string{"train", "--seed", "7"}, args...)
		status, stdout, stderr := run(t, args...)
		if status != 0 {
			t.Fatalf("%v: status %d: %s", args, status, stderr)
		}
		return result(t, stdout), stdout
	}
	quiet := func(args ...string) map[string]string {
		t.Helper()
		r, stdout := train(append([]string{"--quiet"}, args...)...)
		if n := strings.Count(stdout, "\n"); n != 1 {
			t.Errorf("--quiet printed %d lines, want only the RESULT line:\n%s", n, stdout)
		}
		return r
	}
	a := quiet("--epochs", "2", "--checkpoint-dir", dirA, "--csv", csvPath)
	plain := quiet("--epochs", "2")
	quiet("--epochs", "1", "--checkpoint-dir", dirB)
	b, stdout := train("--epochs", "2", "--checkpoint-dir", dirB, "--resume")
	// the resumed run trains epoch 2 only
	if strings.Contains(stdout, "epoch 1/2") || strings.Count(stdout, "epoch 2/2") != 1 {
		t.Errorf("resumed run: want epoch 2/2 only:\n%s", stdout)
	}
	for _, k := range []string{"final_loss", "test_acc", "steps"} {
		if a[k] != b[k] {
			t.Errorf("%s: 2 epochs %s, 1 epoch + resume %s; want equal", k, a[k], b[k])
		}
		if a[k] != plain[k] {
			t.Errorf("%s: with checkpoints %s, without %s; want equal", k, a[k], plain[k])
		}
	}
	if a["final_loss"] == quiet("--epochs", "2", "--seed", "8")["final_loss"] {
		t.Errorf("seeds 7 and 8 end at the same loss %s: the seed is not used", a["final_loss"])
	}
	if ents, err := os.ReadDir(dirA); err != nil || len(ents) == 0 {
		t.Errorf("checkpoint dir %s: %d entries (%v), want checkpoints", dirA, len(ents), err)
	}
	csv, err := os.ReadFile(csvPath)
	if err != nil {
		t.Fatal(err)
	}
	rows := strings.Split(strings.TrimSpace(string(csv)), "\n")
	if len(rows) != 3 || !strings.HasPrefix(rows[0], "epoch,loss") || !strings.HasPrefix(rows[1], "1,") || !strings.HasPrefix(rows[2], "2,") {
		t.Errorf("--csv wrote %d rows, want a header and epochs 1 and 2:\n%s", len(rows), csv)
	}
}

// A resume whose newest checkpoint is damaged continues from the previous
// one, as if the damaged file were not there, and says which file it passed
// over and why.
func TestResumePassesOverDamagedCheckpoint(t *testing.T) {
	damaged, clean := t.TempDir(), t.TempDir()
	for _, dir := range []string{damaged, clean} {
		// 45 steps make an epoch of the digits at batch 32: files for steps 45 and 50
		if status, _, stderr := run(t, "train", "--max-steps", "50", "--checkpoint-dir", dir, "--quiet"); status != 0 {
			t.Fatalf("status %d: %s", status, stderr)
		}
	}
	newest := filepath.Join(damaged, "ckpt-0000000050.safetensors")
	if err := os.Truncate(newest, 100); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(clean, "ckpt-0000000050.safetensors")); err != nil {
		t.Fatal(err)
	}
	status, stdout, stderr := run(t, "train", "--max-steps", "60", "--checkpoint-dir", damaged, "--resume")
	if status != 0 {
		t.Fatalf("status %d: %s", status, stderr)
	}
	if !strings.Contains(stdout, "resumed from "+filepath.Join(damaged, "ckpt-0000000045.safetensors")) || !strings.Contains(stdout, newest) {
		t.Errorf("the run does not say it passed over %s:\n%s", newest, stdout)
	}
	_, want, _ := run(t, "train", "--max-steps", "60", "--checkpoint-dir", clean, "--resume", "--quiet")
	if got, want := result(t, stdout), result(t, want); got["final_loss"] != want["final_loss"] || got["steps"] != want["steps"] {
		t.Errorf("resumed past the damaged file: final_loss %s, steps %s; from the step-45 file alone: %s, %s",
			got["final_loss"], got["steps"], want["final_loss"], want["steps"])
	}
}

// --checkpoint-dir names a directory that need not exist yet (as Keras'
// ModelCheckpoint): the run creates it rather than failing after an epoch
// of training.
func TestCheckpointDirIsCreated(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "runs", "a")
	status, stdout, stderr := run(t, "train", "--epochs", "1", "--quiet", "--checkpoint-dir", dir)
	if status != 0 {
		t.Fatalf("status %d, stderr:\n%s", status, stderr)
	}
	result(t, stdout)
	if ents, err := os.ReadDir(dir); err != nil || len(ents) == 0 {
		t.Errorf("checkpoint dir %s: %d entries (%v), want a checkpoint", dir, len(ents), err)
	}
}

// TestPlanRanks: `headroom plan --ranks 2` plans one process of a
// data-parallel run: the gradient buckets appear (layer allreduce), and
// with --shard-optimizer the optimizer state is halved.
func TestPlanRanks(t *testing.T) {
	args := []string{"plan", "--model", "mlp", "--dataset", "synthetic", "--batch", "128", "--json"}
	status, out, stderr := run(t, args...)
	if status != 0 {
		t.Fatalf("status %d: %s", status, stderr)
	}
	one := decodePlan(t, out)
	status, out, stderr = run(t, append(args, "--ranks", "2")...)
	if status != 0 {
		t.Fatalf("--ranks 2: status %d: %s", status, stderr)
	}
	two := decodePlan(t, out)
	if !strings.Contains(out, `"layer": "allreduce"`) {
		t.Errorf("--ranks 2: no allreduce layer (the gradient buckets) in the plan:\n%s", out)
	}
	if two["optstate_bytes"] != one["optstate_bytes"] {
		t.Errorf("--ranks 2 without sharding: optstate %d, want %d as one process", two["optstate_bytes"], one["optstate_bytes"])
	}
	status, out, stderr = run(t, append(args, "--ranks", "2", "--shard-optimizer")...)
	if status != 0 {
		t.Fatalf("--shard-optimizer: status %d: %s", status, stderr)
	}
	sharded := decodePlan(t, out)
	if r := float64(sharded["optstate_bytes"]) / float64(one["optstate_bytes"]); r > 0.51 || r < 0.49 {
		t.Errorf("--ranks 2 --shard-optimizer: optstate %d, %.3fx one process's, want about 0.5x", sharded["optstate_bytes"], r)
	}
	if status, _, stderr := run(t, "plan", "--ranks", "0"); status == 0 || !strings.Contains(stderr, "--ranks 0") {
		t.Errorf("--ranks 0: status %d, stderr %q; want an error naming the flag", status, stderr)
	}
}
