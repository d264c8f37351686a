package cli_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// planProcesses is the "processes" object of plan --json.
type planProcesses struct {
	Ranks           int   `json:"ranks"`
	Zero            int   `json:"zero"`
	ModelStateBytes int64 `json:"model_state_bytes"`
	OneProcessBytes int64 `json:"one_process_model_state_bytes"`
	Gathers         struct {
		Buffers   int   `json:"buffers"`
		MostBytes int64 `json:"most_bytes"`
	} `json:"gathers"`
	Tried []struct {
		Ranks     int   `json:"ranks"`
		PeakBytes int64 `json:"peak_bytes"`
	} `json:"ranks_tried"`
	RanksNeeded *int `json:"ranks_needed"`
}

// TestPlanZero: `plan --ranks 2 --zero 3` plans one process of two with
// its parameters, gradients and optimizer state sharded (at most 0.55x one
// process's alone), its gather buffers, and, under --budget, the fewest
// processes whose plan fits: every number tried before it does not.
func TestPlanZero(t *testing.T) {
	args := []string{"plan", "--model", "gpt", "--dataset", "go-src", "--ranks", "2", "--zero", "3", "--budget", "100MiB", "--threads", "1"}
	status, out, stderr := run(t, append(args, "--json")...)
	if status != 0 {
		t.Fatalf("status %d: %s", status, stderr)
	}
	var r struct {
		PlanBudget int64          `json:"plan_budget_bytes"`
		Processes  *planProcesses `json:"processes"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil || r.Processes == nil {
		t.Fatalf("plan --json: %v, no processes in:\n%s", err, out)
	}
	p := r.Processes
	ratio := float64(p.ModelStateBytes) / float64(p.OneProcessBytes)
	t.Logf("one process of 2: model state %d B, %.3fx one process's alone; %d gather buffers, at most %d B live", p.ModelStateBytes, ratio, p.Gathers.Buffers, p.Gathers.MostBytes)
	if p.Ranks != 2 || p.Zero != 3 || ratio > 0.55 {
		t.Errorf("ranks %d, zero %d, model state %.3fx one process's; want 2, 3 and at most 0.55x", p.Ranks, p.Zero, ratio)
	}
	if p.Gathers.Buffers == 0 || p.Gathers.MostBytes <= 0 {
		t.Errorf("no gather buffers in a stage 3 plan: %+v", p.Gathers)
	}
	if p.RanksNeeded == nil || *p.RanksNeeded < 2 || len(p.Tried) == 0 {
		t.Fatalf("ranks needed %v after %d plans: want more than one process in 100 MiB", p.RanksNeeded, len(p.Tried))
	}
	for _, tr := range p.Tried {
		fits := tr.PeakBytes <= r.PlanBudget
		if fits != (tr.Ranks == *p.RanksNeeded) {
			t.Errorf("%d processes: peak %d B against %d B (fits %v), yet %d are needed", tr.Ranks, tr.PeakBytes, r.PlanBudget, fits, *p.RanksNeeded)
		}
	}
	status, out, _ = run(t, args...)
	if status != 0 || !strings.Contains(out, "gather buffers") || !strings.Contains(out, "processes fit") {
		t.Errorf("status %d; want the gather buffers and the processes needed in the printed plan:\n%s", status, out)
	}
	for _, bad := range [][]string{{"--zero", "4"}, {"--zero", "3", "--shard-optimizer"}} {
		status, _, stderr := run(t, append([]string{"plan", "--ranks", "2"}, bad...)...)
		if status == 0 || !strings.Contains(stderr, "--zero") {
			t.Errorf("%v: status %d, stderr %q; want an error naming --zero", bad, status, stderr)
		}
		status, _, stderr = run(t, append([]string{"train"}, bad...)...)
		if status == 0 || !strings.Contains(stderr, "--zero") {
			t.Errorf("train %v: status %d, stderr %q; want an error naming --zero", bad, status, stderr)
		}
	}
}
