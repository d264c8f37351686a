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
