package cli_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// slurmScript is the batch script of docs/distributed.md: srun starts the
// ranks (rank, size and addresses from Slurm's environment, through
// PMIx); SIGTERM (scancel --signal=TERM, or --signal's warning before the
// time limit) stops every rank at one step with one checkpoint, and the
// job requeues itself to resume it.
const slurmScript = `#!/bin/sh
#SBATCH --job-name=headroom
#SBATCH --ntasks=2
#SBATCH --requeue
#SBATCH --open-mode=append
#SBATCH --signal=TERM@60
srun %s --checkpoint-dir %s --checkpoint-every 20 --resume
rc=$?
echo "srun exited $rc (restarts: ${SLURM_RESTART_COUNT:-0})"
if [ "$rc" -eq 143 ]; then
  scontrol requeue "$SLURM_JOB_ID"
fi
exit $rc
`

// TestSlurm is issue 27's third acceptance, under a one-node Slurm the
// test starts: srun -n 2 trains data-parallel (--zero 2); a batch job
// stopped mid-run by scancel --signal=TERM stops both ranks after one
// step with one (sharded) checkpoint and requeues itself; the requeued job
// resumes it and ends bit for bit on the uninterrupted run's losses.
func TestSlurm(t *testing.T) {
	needSlurm(t)
	_, bin := buildMPI(t, "headroom-slurm")
	c := startSlurm(t)
	args := []string{bin, "train", "--model", "mlp", "--dataset", "synthetic", "--batch", "128", "--epochs", "2",
		"--max-steps", "300", "--threads", "1", "--seed", "3", "--zero", "2"}
	out, err := c.cmd("srun", append([]string{"-n", "2"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("srun -n 2: %v\n%s\n%s", err, out, c.logs())
	}
	want := resultValues(string(out), "final_loss", "val_loss")
	if r := resultString(t, string(out), "ranks"); r != "2" {
		t.Fatalf("srun -n 2 trained on %s ranks, want 2", r)
	}
	t.Logf("srun -n 2: %s", want)

	dir := t.TempDir()
	ckpt, log, script := filepath.Join(dir, "ckpt"), filepath.Join(dir, "job.out"), filepath.Join(dir, "train.sbatch")
	if err := os.WriteFile(script, fmt.Appendf(nil, slurmScript, strings.Join(args, " "), ckpt), 0o755); err != nil {
		t.Fatal(err)
	}
	idb, err := c.cmd("sbatch", "--parsable", "-o", log, script).Output()
	if err != nil {
		t.Fatalf("sbatch: %v", err)
	}
	id := strings.TrimSpace(string(idb))
	// mid-run: the first periodic checkpoint written (a loaded machine
	// takes a while to make the data)
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if m, _ := filepath.Glob(filepath.Join(ckpt, "ckpt-0000000020*.index.json")); len(m) > 0 {
			break
		}
		if time.Now().After(deadline) {
			data, _ := os.ReadFile(log)
			t.Fatalf("job %s wrote no checkpoint at step 20\n%s", id, data)
		}
	}
	if out, err := c.cmd("scancel", "--signal=TERM", id).CombinedOutput(); err != nil {
		t.Fatalf("scancel --signal=TERM: %v\n%s", err, out)
	}
	// requeued: pending until Slurm's requeue delay; one checkpoint by then
	for deadline := time.Now().Add(60 * time.Second); c.jobField(id, "Restarts") != "1" || c.jobField(id, "JobState") != "PENDING"; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			data, _ := os.ReadFile(log)
			t.Fatalf("job %s was not requeued: state %s, restarts %s\n%s", id, c.jobField(id, "JobState"), c.jobField(id, "Restarts"), data)
		}
	}
	// the checkpoints when it stopped (the resumed job prunes them)
	indexes, _ := filepath.Glob(filepath.Join(ckpt, "*.index.json")) // in step order
	parts := map[string]int{}                                        // by step
	all, _ := filepath.Glob(filepath.Join(ckpt, "ckpt-*-of-*.safetensors"))
	for _, f := range all {
		parts[strings.Split(filepath.Base(f), "-")[1]]++
	}
	// Slurm holds a requeued job for about 2 minutes; release it once the
	// node is idle again (slurmd refuses a job it is still killing)
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if out, _ := c.cmd("sinfo", "-h", "-o", "%T").Output(); strings.TrimSpace(string(out)) == "idle" {
			time.Sleep(2 * time.Second)
			if out, err := c.cmd("scontrol", "update", "JobId="+id, "StartTime=now").CombinedOutput(); err != nil {
				t.Logf("scontrol update StartTime=now: %v %s (waiting out the requeue delay)", err, out)
			}
			break
		}
	}
	for deadline := time.Now().Add(4 * time.Minute); c.jobField(id, "JobState") != "COMPLETED"; time.Sleep(500 * time.Millisecond) {
		if st := c.jobField(id, "JobState"); time.Now().After(deadline) || st == "FAILED" || st == "CANCELLED" {
			data, _ := os.ReadFile(log)
			show, _ := c.cmd("scontrol", "show", "job", id).CombinedOutput()
			t.Fatalf("the requeued job: state %s\n%s\n%s\n%s", st, data, show, c.logs())
		}
	}
	data, _ := os.ReadFile(log)
	text := string(data)
	t.Logf("job %s's output:\n%s", id, text)
	stops := regexp.MustCompile(`stopped by SIGTERM after step (\d+)`).FindAllStringSubmatch(text, -1)
	if len(stops) != 2 || stops[0][1] != stops[1][1] {
		t.Fatalf("want both ranks stopped after one step, got %q", stops)
	}
	step := stops[0][1]
	if n, _ := strconv.Atoi(step); n <= 0 || n >= 300 {
		t.Errorf("stopped after step %s, want mid-run (1..299)", step)
	}
	if len(indexes) == 0 || !strings.HasSuffix(indexes[len(indexes)-1], fmt.Sprintf("ckpt-%010s.safetensors.index.json", step)) {
		t.Errorf("after the stop: checkpoints %v, want the newest at step %s", indexes, step)
	}
	if n := parts[fmt.Sprintf("%010s", step)]; n != 2 {
		t.Errorf("step %s's checkpoint has %d parts, want one of each rank", step, n)
	}
	for _, want := range []string{"srun exited 143 (restarts: 0)", "resume: starting from " + filepath.Join(ckpt, fmt.Sprintf("ckpt-%010s", step)), "srun exited 0 (restarts: 1)"} {
		if !strings.Contains(text, want) {
			t.Errorf("the job's output lacks %q", want)
		}
	}
	if got := resultValues(text, "final_loss", "val_loss"); got != want {
		t.Errorf("the requeued job ends with %s, the uninterrupted run with %s: want them bit for bit", got, want)
	}
}
