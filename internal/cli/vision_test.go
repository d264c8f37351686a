package cli_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/headroom-ml/headroom/internal/cli"
)

// The U-Net on a small shapes set: 240 training and 48 test images of
// 16x16 (the model is the reference one; only the images are smaller).
func smallShapes(t *testing.T) {
	t.Cleanup(cli.SetShapesSize(240, 48, 16))
}

// TestUNetTrains: the per-pixel loss falls at least 5x, the plan is what
// the ledger measured, and pixel accuracy is counted.
func TestUNetTrains(t *testing.T) {
	smallShapes(t)
	status, stdout, stderr := run(t, "train", "--model", "unet", "--dataset", "shapes", "--epochs", "12", "--batch", "16", "--quiet")
	if status != 0 {
		t.Fatalf("status %d: %s", status, stderr)
	}
	r := result(t, stdout)
	first, final := num(t, r, "first_loss"), num(t, r, "final_loss")
	if first < 5*final {
		t.Errorf("loss fell from %v to %v: want at least 5x", first, final)
	}
	if planned, measured := integer(t, r, "planned_peak_bytes"), integer(t, r, "measured_peak_bytes"); planned != measured {
		t.Errorf("planned %d B, measured %d B: want equal", planned, measured)
	}
	if acc := num(t, r, "test_acc"); !(acc > 0.8 && acc <= 1) {
		t.Errorf("test pixel accuracy %v, want above 0.8", acc)
	}
	if got := integer(t, r, "param_count"); got != 116804 {
		t.Errorf("param_count=%d, want 116804", got)
	}
	t.Logf("first_loss %v final_loss %v test_acc %s", first, final, r["test_acc"])
}

// TestUNetPlanBudget: plan names the largest batch a budget holds (batch n
// fits, n+1 does not), and --fit-to-budget trains under half of what the
// plain batch needs, within its budget.
func TestUNetPlanBudget(t *testing.T) {
	smallShapes(t)
	peak := func(batch int64) int64 {
		status, out, stderr := run(t, "plan", "--json", "--model", "unet", "--dataset", "shapes", "--batch", fmt.Sprint(batch))
		if status != 0 {
			t.Fatalf("plan --batch %d: status %d: %s", batch, status, stderr)
		}
		return decodePlan(t, out)["peak_bytes"]
	}
	full := peak(64)
	// the U-Net plans on its own data set unless told another
	if status, out, stderr := run(t, "plan", "--json", "--model", "unet"); status != 0 || !strings.Contains(out, `"dataset": "shapes"`) {
		t.Errorf("plan --model unet: status %d, want the shapes data set:\n%s%s", status, out, stderr)
	}
	budget := (peak(16) + peak(24)) / 2 // between two batch sizes, for the plan
	// --budget is the whole process's: the plan's plus the process's own
	status, out, stderr := run(t, "plan", "--json", "--model", "unet", "--dataset", "shapes", "--batch", "64", "--budget", fmt.Sprint(budget+processOverhead))
	if status != 0 {
		t.Fatalf("plan --budget %d: status %d: %s", budget, status, stderr)
	}
	n := decodePlan(t, out)["max_batch_for_budget"]
	if n < 16 || n >= 24 {
		t.Errorf("max_batch_for_budget = %d for a budget between batches 16 and 24", n)
	}
	if p := peak(n); p > budget {
		t.Errorf("batch %d: peak %d B > budget %d B", n, p, budget)
	}
	if p := peak(n + 1); p <= budget {
		t.Errorf("batch %d: peak %d B also fits the budget %d B", n+1, p, budget)
	}

	half := full / 2
	status, stdout, stderr := run(t, "train", "--model", "unet", "--dataset", "shapes", "--batch", "64", "--epochs", "1",
		"--budget", fmt.Sprint(half+processOverhead), "--fit-to-budget", "--quiet")
	if status != 0 {
		t.Fatalf("--fit-to-budget under %d B (half of batch 64's %d B): status %d: %s", half, full, status, stderr)
	}
	r := result(t, stdout)
	planned, measured := integer(t, r, "planned_peak_bytes"), integer(t, r, "measured_peak_bytes")
	if planned != measured || measured > half {
		t.Errorf("fit to %d B: planned %d B, measured %d B; want equal and within the budget", half, planned, measured)
	}
	if integer(t, r, "micro_batch") >= 64 && r["remat_bytes_saved"] == "0" {
		t.Errorf("fit to half the plan changed nothing: %v", r)
	}
}

// TestResNetTrains: the ResNet-20 trains from the CLI (on the digits, 8x8,
// to stay quick) with the peers' parameter count and planned == measured,
// and plan reports the same count.
func TestResNetTrains(t *testing.T) {
	status, stdout, stderr := run(t, "train", "--model", "resnet", "--dataset", "digits", "--epochs", "2", "--batch", "64", "--quiet")
	if status != 0 {
		t.Fatalf("status %d: %s", status, stderr)
	}
	r := result(t, stdout)
	if got := integer(t, r, "param_count"); got != 272186 {
		t.Errorf("param_count=%d, want 272186 (PyTorch's count of the peers' ResNet-20)", got)
	}
	if planned, measured := integer(t, r, "planned_peak_bytes"), integer(t, r, "measured_peak_bytes"); planned != measured {
		t.Errorf("planned %d B, measured %d B: want equal", planned, measured)
	}
	// (test accuracy waits for the moving statistics of BatchNormalization,
	// momentum 0.99, to forget their start: a few hundred steps)
	if first, final := num(t, r, "first_loss"), num(t, r, "final_loss"); first < 10*final {
		t.Errorf("training loss fell from %v to %v: want at least 10x", first, final)
	}
	status, out, stderr := run(t, "plan", "--json", "--model", "resnet", "--dataset", "digits")
	if status != 0 {
		t.Fatalf("plan: status %d: %s", status, stderr)
	}
	if got := decodePlan(t, out)["param_count"]; got != 272186 {
		t.Errorf("plan param_count=%d, want 272186", got)
	}
}
