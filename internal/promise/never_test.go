package promise

import (
	"fmt"
	"strings"
	"testing"
)

// TestNeverKilled is the never-killed matrix: the five reference models
// (mlp, cnn, resnet, unet, gpt) in memory cgroups of 0.4x, 0.7x, 1.0x and
// 1.3x what each needs (its planned peak, from the same run outside any
// cgroup, plus the process's own 32 MiB), with and without
// --fit-to-budget, no --budget: headroom reads the limit itself and
// follows it. Every run ends in exit 0 within the limit or a refusal
// before step 1 (status 1 naming the limit and a remedy, nothing loaded),
// never in status 137, and the cgroup counts no OOM kill. It prints the
// runs, refusals, completions and kills.
func TestNeverKilled(t *testing.T) {
	var runs, refusals, completions, kills int
	var table []string
	for _, k := range containerRuns(t) {
		if k.name == "lstm" || k.name == "keras" {
			continue
		}
		args := append([]string{"train", "--threads", "2", "--epochs", "1", "--seed", "1"}, k.args...)
		free := headroom(t, args...)
		free.ok(t)
		needs := bytesField(t, free, free.result(t), "planned_peak_bytes") + processOwn
		for _, frac := range []float64{0.4, 0.7, 1.0, 1.3} {
			for _, fit := range []bool{false, true} {
				name := fmt.Sprintf("%s/%.1fx", k.name, frac)
				a := args
				if fit {
					name += "/fit-to-budget"
					a = append(append([]string(nil), args...), "--fit-to-budget")
				}
				limit := int64(float64(needs)*frac) &^ (1<<20 - 1)
				var outcome string
				t.Run(name, func(t *testing.T) {
					c := inCgroup(t, limit, a)
					runs++
					switch {
					case c.status == 137 || c.kills > 0:
						kills++
						outcome = "KILLED"
						c.notKilled(t)
					case c.status == 0:
						completions++
						outcome = "completed"
						c.trainedWithin(t)
					default:
						refusals++
						outcome = fmt.Sprintf("refused (status %d)", c.status)
						c.refused(t)
					}
				})
				table = append(table, fmt.Sprintf("  %-28s %4d MiB  %s", name, limit>>20, outcome))
			}
		}
	}
	t.Logf("never-killed matrix:\n%s\nruns %d, refusals %d, completions %d, kills %d", strings.Join(table, "\n"), runs, refusals, completions, kills)
	fmt.Printf("never-killed matrix: runs %d, refusals %d, completions %d, kills %d\n", runs, refusals, completions, kills)
	if kills != 0 {
		t.Errorf("%d of %d runs were killed, want 0", kills, runs)
	}
}
