package promise

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/headroom-ml/headroom/internal/testutil"
)

// processOwn is what a run needs beside its plan: the process itself (the
// Go runtime, the code, garbage between collections), as headroom counts
// it when it turns a memory limit into a plan's budget.
const processOwn = 32 << 20

// containerRuns are a run of each model kind large enough that half of
// what it needs leaves a plan room to train in (except the Keras config,
// whose largest batch on the digits is the whole training set: half of
// what it needs is less than the process's own 32 MiB).
func containerRuns(t *testing.T) []struct {
	name string
	args []string
} {
	text := textFile(t)
	fashionMNIST(t)
	return []struct {
		name string
		args []string
	}{
		{"mlp", []string{"--model", "mlp", "--dataset", "synthetic", "--batch", "128", "--max-steps", "3"}},
		{"cnn", []string{"--model", "cnn", "--dataset", "fashion-mnist", "--batch", "256", "--max-steps", "2"}},
		{"resnet", []string{"--model", "resnet", "--dataset", "digits", "--batch", "512", "--max-steps", "2"}},
		{"unet", []string{"--model", "unet", "--dataset", "shapes", "--batch", "64", "--max-steps", "2"}},
		{"gpt", []string{"--model", "gpt", "--text", text, "--seq", "128", "--batch", "16", "--max-steps", "2"}},
		{"lstm", []string{"--model", "lstm", "--text", text, "--seq", "64", "--batch", "128", "--max-steps", "2"}},
		{"keras", []string{"--keras", kerasConfig(t), "--dataset", "digits", "--batch", "1437", "--max-steps", "2"}},
	}
}

// remedyRE matches a remedy in a refusal: a batch that fits, a flag that
// makes the run smaller, or the memory the run would fit in.
var remedyRE = regexp.MustCompile(`batch \d+ fits|--fit-to-budget|--batch|--stream|--remat|--accumulate|--precision|--seq|at least \d+(\.\d+)? [KMG]iB`)

// caged is a run in a memory cgroup: how it ended, the cgroup's peak
// usage and the OOM kills it counted.
type caged struct {
	*run
	limit, peak int64
	kills       int
}

// inCgroup runs headroom with args in a new memory cgroup of limit bytes.
func inCgroup(t *testing.T, limit int64, args []string) *caged {
	t.Helper()
	cg := testutil.NewMemoryCgroup(t, limit)
	r := wait(t, args, start(t, cg.Command(bin, args...), args))
	c := &caged{run: r, limit: limit}
	var err error
	if c.peak, err = cg.Peak(); err != nil {
		t.Fatalf("reading the cgroup's peak: %v", err)
	}
	if c.kills, err = cg.OOMKills(); err != nil {
		t.Fatalf("reading the cgroup's OOM kills: %v", err)
	}
	t.Logf("%s in %d MiB: status %d, cgroup peak %.1f MiB, %d OOM kills, %.1fs", c, limit>>20, c.status, float64(c.peak)/(1<<20), c.kills, c.wall.Seconds())
	return c
}

// notKilled checks that the kernel did not kill the run.
func (c *caged) notKilled(t *testing.T) {
	t.Helper()
	if c.status == 137 || c.kills > 0 {
		t.Fatalf("%s in a %d MiB cgroup: got status %d and %d OOM kills (cgroup peak %d B), want no kill\n%s",
			c, c.limit>>20, c.status, c.kills, c.peak, c.output())
	}
}

// refused checks a refusal before step 1: status 1, stderr naming the
// memory limit and a remedy, no epoch or RESULT line, and a cgroup peak
// under 64 MiB (nothing of the data set was loaded or generated first).
func (c *caged) refused(t *testing.T) {
	t.Helper()
	if c.status != 1 {
		t.Errorf("%s in a %d MiB cgroup: got status %d, want 1 (refused before step 1)\n%s", c, c.limit>>20, c.status, c.output())
	}
	limit := fmt.Sprintf("%.2f MiB", float64(c.limit)/(1<<20))
	if !strings.Contains(strings.ToLower(c.stderr), "memory limit") || !strings.Contains(c.stderr, limit) {
		t.Errorf("%s: got stderr %q, want it to name the memory limit (%s)", c, strings.TrimSpace(c.stderr), limit)
	}
	if !remedyRE.MatchString(c.stderr) {
		t.Errorf("%s: got stderr %q, want a remedy (matching %s)", c, strings.TrimSpace(c.stderr), remedyRE)
	}
	if startedTraining(c.stdout) {
		t.Errorf("%s: got epoch or RESULT lines on stdout, want a refusal before step 1\n%s", c, c.output())
	}
	if c.peak >= 64<<20 {
		t.Errorf("%s: got a cgroup peak of %.1f MiB before the refusal, want under 64 MiB (no data set loaded or generated before it)", c, float64(c.peak)/(1<<20))
	}
}

// trainedWithin checks a run that trained in the cgroup: status 0,
// planned equals measured, the cgroup's peak within its limit.
func (c *caged) trainedWithin(t *testing.T) {
	t.Helper()
	trained(t, c.run)
	if c.peak > c.limit {
		t.Errorf("%s: got a cgroup peak of %d B, want it within the limit %d B", c, c.peak, c.limit)
	}
}

// TestHalfTheContainer: in a memory cgroup at half of what a run needs
// (its planned peak, from the same run's RESULT outside any cgroup, plus
// the process's own 32 MiB), with no --budget, headroom reads the limit
// itself and is never killed. Without --fit-to-budget it refuses before
// step 1, or trains because it streams a built-in data set too big for
// the limit; with --fit-to-budget it trains within the limit (refusing
// only where the limit is not even the process's own 32 MiB).
func TestHalfTheContainer(t *testing.T) {
	for _, k := range containerRuns(t) {
		t.Run(k.name, func(t *testing.T) {
			args := append([]string{"train", "--threads", "2", "--epochs", "1", "--seed", "1"}, k.args...)
			free := headroom(t, args...)
			free.ok(t)
			res := free.result(t)
			planned := bytesField(t, free, res, "planned_peak_bytes")
			needs := planned + processOwn
			limit := needs / 2 &^ (1<<20 - 1)
			t.Logf("%s: planned_peak_bytes=%d; needs %.1f MiB; cgroup limit %d MiB", free, planned, float64(needs)/(1<<20), limit>>20)

			t.Run("plain", func(t *testing.T) {
				c := inCgroup(t, limit, args)
				c.notKilled(t)
				if c.status != 0 {
					c.refused(t)
					return
				}
				if !strings.Contains(strings.ToLower(c.stdout), "stream") {
					t.Errorf("%s in a %d MiB cgroup: got status 0 without streaming, want a refusal before step 1 or a streamed data set\n%s", c, limit>>20, c.output())
				}
				c.trainedWithin(t)
			})
			t.Run("fit-to-budget", func(t *testing.T) {
				c := inCgroup(t, limit, append(args, "--fit-to-budget"))
				c.notKilled(t)
				if limit <= processOwn {
					c.refused(t) // nothing fits beside the process itself
					return
				}
				c.trainedWithin(t)
			})
		})
	}
}
