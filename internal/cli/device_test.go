package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// plan --device cuda works without a GPU from a stated device: its budget
// is --device-memory, the per-device scratch (cuBLAS's workspace) is in
// the plan, and --ptx writes every kernel the run would load, one file
// each, written for the stated architecture.
func TestPlanOnStatedGPU(t *testing.T) {
	dir := t.TempDir()
	status, stdout, stderr := run(t, "plan", "--model", "cnn", "--device", "cuda", "--device-memory", "80GiB", "--device-arch", "sm_80", "--ptx", dir)
	if status != 0 {
		t.Fatalf("status %d: %s", status, stderr)
	}
	for _, want := range []string{"budget for the plan 80.00 GiB (--device-memory 80GiB", "wrote the PTX of"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.ptx"))
	if err != nil || len(files) < 10 {
		t.Fatalf("%d kernels written (%v)", len(files), err)
	}
	b, err := os.ReadFile(files[0])
	if err != nil || !strings.Contains(string(b), ".target sm_80") || !strings.Contains(string(b), ".visible .entry "+strings.TrimSuffix(filepath.Base(files[0]), ".ptx")) {
		t.Errorf("%s is not a module for sm_80 holding its kernel:\n%.300s", files[0], b)
	}
	// JSON: the device's budget and a peak that counts the GPU's scratch
	status, js, stderr := run(t, "plan", "--json", "--model", "cnn", "--device", "cuda", "--device-memory", "1GiB")
	if status != 0 {
		t.Fatalf("status %d: %s", status, stderr)
	}
	plan := decodePlan(t, js)
	if plan["plan_budget_bytes"] != 1<<30 || plan["workspace_bytes"] < 4<<20 {
		t.Errorf("plan %v: want a budget of 1 GiB and cuBLAS's workspace in the workspace", plan)
	}
}

// Without -tags cuda a run on a GPU fails before anything runs, saying how
// to build one; bad device flags are usage errors.
func TestDeviceFlagsWithoutCUDA(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"train", "--device", "cuda", "--epochs", "1"}, "-tags cuda"},
		{[]string{"plan", "--device", "cuda:1"}, "--device-memory"},
		{[]string{"train", "--device", "gpu"}, "want cpu, cuda or cuda:N"},
		{[]string{"train", "--device", "cuda:x"}, "bad device"},
		{[]string{"plan", "--ptx", "x"}, "give --device cuda"},
		{[]string{"plan", "--device-memory", "1GiB"}, "with --device cuda"},
		{[]string{"plan", "--device", "cuda", "--device-memory", "1GiB", "--device-arch", "sm_5"}, "--device-arch"},
	} {
		status, _, stderr := run(t, tc.args...)
		if status == 0 || !strings.Contains(stderr, tc.want) {
			t.Errorf("headroom %s: status %d, stderr %q; want a failure saying %q", strings.Join(tc.args, " "), status, stderr, tc.want)
		}
	}
}
