package promise

import (
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

// stopRun is a run of one model kind that a signal stops mid-epoch: a
// checkpoint every `every` steps, --max-steps maxSteps, both inside the
// first epoch, and the steps after the first checkpoint long enough (a
// second or so) for the signal to arrive while the run trains.
type stopRun struct {
	name            string
	args            []string
	every, maxSteps string
}

func stopRuns(t *testing.T) []stopRun {
	imgs, text := imageFolder(t, 32, 100), textFile(t)
	return []stopRun{
		{"mlp", []string{"--model", "mlp", "--dataset", "digits", "--batch", "4"}, "10", "60"},               // 360 steps an epoch
		{"cnn", []string{"--model", "cnn", "--data", imgs, "--batch", "2"}, "10", "70"},                      // 100
		{"resnet", []string{"--model", "resnet", "--dataset", "digits", "--batch", "8"}, "10", "100"},        // 180
		{"unet", []string{"--model", "unet", "--dataset", "shapes", "--batch", "4"}, "10", "80"},             // 500
		{"gpt", []string{"--model", "gpt", "--text", text, "--seq", "32", "--batch", "4"}, "5", "40"},        // about 1,500
		{"lstm", []string{"--model", "lstm", "--text", text, "--seq", "32", "--batch", "4"}, "5", "30"},      // about 1,500
		{"keras", []string{"--keras", kerasConfig(t), "--dataset", "digits", "--batch", "1"}, "100", "1400"}, // 1,437
	}
}

// command is the run's command line with its checkpoints in dir.
func (s stopRun) command(dir string, extra ...string) []string {
	args := append([]string{"train", "--threads", "2", "--seed", "3", "--epochs", "1", "--max-steps", s.maxSteps,
		"--checkpoint-dir", dir, "--checkpoint-every", s.every}, s.args...)
	return append(args, extra...)
}

// checkpoints lists the checkpoint files in dir (not the temporary files a
// checkpoint is written through).
func checkpoints(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if n := e.Name(); !strings.HasPrefix(n, ".") && strings.HasSuffix(n, ".safetensors") {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// interrupt starts s with its checkpoints in a new directory, waits for
// the first checkpoint (the run is then mid-epoch), sends sig and checks
// that the process exits with status want having written a checkpoint
// that its output names. It returns the checkpoint directory.
func interrupt(t *testing.T, s stopRun, sig syscall.Signal, want int) string {
	t.Helper()
	dir := t.TempDir()
	args := s.command(dir)
	p := start(t, exec.Command(bin, args...), args)
	deadline := time.Now().Add(runTimeout)
	for len(checkpoints(t, dir)) == 0 {
		select {
		case <-p.exited:
			r := wait(t, args, p)
			t.Fatalf("%s: got status %d before its first checkpoint (--checkpoint-every %s), want it still training\n%s", r, r.status, s.every, r.output())
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			break // wait reports the timeout
		}
	}
	first := checkpoints(t, dir)
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("sending %v: %v", sig, err)
	}
	r := wait(t, args, p)
	t.Logf("%s: %v after %s, status %d in %.1fs", s.name, sig, first, r.status, r.wall.Seconds())
	if r.status == 0 {
		t.Fatalf("%s: finished (status 0) before %v reached it: give it more --max-steps than %s", r, sig, s.maxSteps)
	}
	if r.status != want {
		t.Errorf("%s: %v after checkpoint %v: got status %d, want %d\n%s", r, sig, first, r.status, want, r.output())
	}
	named := false
	for _, c := range checkpoints(t, dir) {
		if strings.Contains(r.stdout+r.stderr, filepath.Join(dir, c)) {
			named = true
		}
	}
	if !named {
		t.Errorf("%s: %v: got no checkpoint of %v named in the output, want the one it wrote named\n%s", r, sig, checkpoints(t, dir), r.output())
	}
	return dir
}

// resumeMatches resumes s from dir and checks that it ends where the
// uninterrupted run whole ended, bit for bit as RESULT prints it.
func resumeMatches(t *testing.T, s stopRun, dir string, whole map[string]string) {
	t.Helper()
	r := headroom(t, s.command(dir, "--resume")...)
	r.ok(t)
	res := r.result(t)
	for _, k := range []string{"final_loss", "steps", "val_loss", "val_acc", "test_acc"} {
		if res[k] != whole[k] {
			t.Errorf("%s: got %s=%s, want the uninterrupted run's %s", r, k, res[k], whole[k])
		}
	}
}

// TestSignalThenResume: for each model kind, SIGTERM mid-epoch (how Slurm
// and Kubernetes stop a job) exits 143 having written a checkpoint it
// names, and --resume from it ends with the uninterrupted run's final_loss
// (val_loss, test_acc where present). SIGINT exits 130 the same way (the
// gpt).
func TestSignalThenResume(t *testing.T) {
	for _, s := range stopRuns(t) {
		t.Run(s.name, func(t *testing.T) {
			r := headroom(t, s.command(t.TempDir())...)
			r.ok(t)
			whole := r.result(t)
			t.Run("SIGTERM", func(t *testing.T) { resumeMatches(t, s, interrupt(t, s, syscall.SIGTERM, 143), whole) })
			if s.name == "gpt" {
				t.Run("SIGINT", func(t *testing.T) { resumeMatches(t, s, interrupt(t, s, syscall.SIGINT, 130), whole) })
			}
		})
	}
}
