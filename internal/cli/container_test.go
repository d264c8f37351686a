package cli_test

import (
	"bytes"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/headroom-ml/headroom/datasets"
	"github.com/headroom-ml/headroom/internal/testutil"
)

// In a container with a 200 MiB memory limit (a real memory cgroup),
// headroom reads the limit it lives under: a run whose plan does not fit is
// refused before step 1 naming the container's limit and a batch that fits
// (instead of being killed with status 137), and --fit-to-budget trains
// inside the limit, without an OOM kill.
func TestContainerLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("trains the cnn on Fashion-MNIST in a cgroup")
	}
	if _, err := os.Stat(datasets.FashionMNISTDir); err != nil {
		t.Skipf("Fashion-MNIST is not installed (%v): the test command installs Debian's dataset-fashion-mnist", err)
	}
	const limit = 200 << 20
	bin := buildHeadroom(t)
	args := []string{"train", "--model", "cnn", "--dataset", "fashion-mnist", "--batch", "1024", "--epochs", "1", "--max-steps", "8", "--threads", "2"}
	runIn := func(extra ...string) (stdout, stderr string, code int, peak int64, kills int) {
		t.Helper()
		cg := testutil.NewMemoryCgroup(t, limit)
		cmd := cg.Command(bin, append(args, extra...)...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				code = 128 + int(ws.Signal()) // 137: killed by the OOM killer
			}
		} else if err != nil {
			t.Fatal(err)
		}
		var perr, kerr error
		peak, perr = cg.Peak()
		kills, kerr = cg.OOMKills()
		if perr != nil || kerr != nil {
			t.Fatalf("reading the cgroup: %v, %v", perr, kerr)
		}
		return out.String(), errb.String(), code, peak, kills
	}
	_, stderr, code, peak, kills := runIn()
	t.Logf("batch 1024: status %d, peak %d MiB, %d OOM kills\n%s", code, peak>>20, kills, stderr)
	if code != 1 || kills != 0 {
		t.Fatalf("batch 1024 in 200 MiB: status %d with %d OOM kills; want status 1 before step 1, no kill", code, kills)
	}
	for _, want := range []string{"container's memory limit", "200.00 MiB"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("the refusal does not name %q:\n%s", want, stderr)
		}
	}
	if !regexp.MustCompile(`batch \d+ fits`).MatchString(stderr) || strings.Contains(stderr, "goroutine") {
		t.Errorf("the refusal does not name a batch that fits (or shows a trace):\n%s", stderr)
	}
	stdout, stderr, code, peak, kills := runIn("--fit-to-budget")
	t.Logf("--fit-to-budget: status %d, peak %d MiB, %d OOM kills", code, peak>>20, kills)
	if code != 0 || kills != 0 {
		t.Fatalf("--fit-to-budget in 200 MiB: status %d, %d OOM kills:\n%s\n%s", code, kills, stdout, stderr)
	}
	r := result(t, stdout)
	if r["planned_peak_bytes"] != r["measured_peak_bytes"] || peak > limit {
		t.Errorf("planned %s, measured %s, cgroup peak %d B (limit %d)", r["planned_peak_bytes"], r["measured_peak_bytes"], peak, limit)
	}
}

// maxRSS runs bin with args and returns its stdout and peak resident set
// size as the OS measured it: the RESULT line's peak_rss_mib, the kernel's
// VmHWM of the process (getrusage's ru_maxrss of a child would carry this
// test process's own peak across execve).
func maxRSS(t *testing.T, bin string, args ...string) (string, int64) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v: %v\n%s%s", args, err, out.String(), errb.String())
	}
	mib := num(t, result(t, out.String()), "peak_rss_mib")
	return out.String(), int64(mib * (1 << 20))
}

// --budget is the whole process's memory: the Fashion-MNIST run under
// 160 MiB peaks below it as the OS measures it (the data set, 55 MB, is
// within half of what the budget leaves a plan, so it is held in one
// buffer of its own size), and under 64 MiB, where the training set would
// take more than half, it is streamed from disk and still peaks
// below its budget, with the measured ledger within the plan.
func TestBudgetIsTheProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("trains on Fashion-MNIST")
	}
	if _, err := os.Stat(datasets.FashionMNISTDir); err != nil {
		t.Skipf("Fashion-MNIST is not installed (%v)", err)
	}
	bin := buildHeadroom(t)
	for _, c := range []struct {
		budget string
		bytes  int64
		stream bool
	}{{"160MiB", 160 << 20, false}, {"64MiB", 64 << 20, true}} {
		stdout, rss := maxRSS(t, bin, "train", "--dataset", "fashion-mnist", "--budget", c.budget, "--epochs", "1", "--threads", "2")
		r := result(t, stdout)
		t.Logf("--budget %s: peak RSS %.1f MiB, planned %s, measured %s, test_acc %s", c.budget, float64(rss)/(1<<20), r["planned_peak_bytes"], r["measured_peak_bytes"], r["test_acc"])
		if rss > c.bytes {
			t.Errorf("--budget %s: peak RSS %d B, over the budget", c.budget, rss)
		}
		if got := strings.Contains(stdout, "streamed from"); got != c.stream {
			t.Errorf("--budget %s: streamed %v, want %v:\n%s", c.budget, got, c.stream, stdout)
		}
		planned, measured := integer(t, r, "planned_peak_bytes"), integer(t, r, "measured_peak_bytes")
		if measured != planned {
			t.Errorf("--budget %s: measured %d B, planned %d B", c.budget, measured, planned)
		}
		if acc := num(t, r, "test_acc"); acc < 0.8 {
			t.Errorf("--budget %s: test_acc %v, want a model that learned (>= 0.8)", c.budget, acc)
		}
	}
}
