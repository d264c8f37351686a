package cli_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A run stopped part-way through an epoch (here by --max-steps) writes a
// checkpoint of exactly where it stands; --resume continues from there and
// ends with the uninterrupted run's final loss, bit for bit. Before, the
// checkpoint was labelled an epoch end and the resume skipped the rest of
// the epoch.
func TestMaxStepsThenResume(t *testing.T) {
	dir := t.TempDir()
	args := []string{"train", "--model", "mlp", "--epochs", "3", "--seed", "3"}
	whole := quietRun(t, args...)
	part := quietRun(t, append(args, "--checkpoint-dir", dir, "--max-steps", "60")...)
	if part["steps"] != "60" {
		t.Fatalf("--max-steps 60 stopped after %s steps", part["steps"])
	}
	status, stdout, stderr := run(t, append(args, "--checkpoint-dir", dir, "--resume")...)
	if status != 0 {
		t.Fatalf("resume: status %d: %s", status, stderr)
	}
	// the resume says where it starts, before step 1
	at := strings.Index(stdout, "resume: starting from ")
	if at < 0 || at > strings.Index(stdout, "epoch 2/3") || !strings.Contains(stdout, "15 batches into epoch 2") {
		t.Errorf("the resume does not say, before its first epoch, that it starts 15 batches into epoch 2:\n%s", stdout)
	}
	r := result(t, stdout)
	for _, k := range []string{"final_loss", "steps", "test_acc"} {
		if r[k] != whole[k] {
			t.Errorf("%s: resumed %s, uninterrupted %s", k, r[k], whole[k])
		}
	}
	// resuming a finished run has nothing to do
	status, stdout, stderr = run(t, append(args, "--checkpoint-dir", dir, "--resume")...)
	if status != 0 || !strings.Contains(stdout, "nothing to do") || strings.Contains(stdout, "RESULT") || strings.Contains(stdout, "NaN") {
		t.Errorf("resuming a finished run: status %d, stdout:\n%s\nstderr: %s\nwant exit 0 saying there is nothing to do", status, stdout, stderr)
	}
}

func quietRun(t *testing.T, args ...string) map[string]string {
	t.Helper()
	status, stdout, stderr := run(t, append(args, "--quiet")...)
	if status != 0 {
		t.Fatalf("%v: status %d: %s", args, status, stderr)
	}
	return result(t, stdout)
}

// buildHeadroom builds the command into a temporary directory, for tests
// that need a process of its own (signals, memory limits).
func buildHeadroom(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "headroom")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/headroom-ml/headroom/cmd/headroom")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// SIGTERM (how Slurm and Kubernetes stop a job) finishes the step in
// progress, writes a checkpoint of exactly where the run is, says so and
// exits 143; --resume then ends with the uninterrupted run's final loss,
// bit for bit. SIGINT exits 130.
func TestSignalThenResume(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command and trains three times")
	}
	bin := buildHeadroom(t)
	args := []string{"train", "--model", "mlp", "--dataset", "synthetic", "--threads", "2", "--max-steps", "250", "--quiet"}
	runBin := func(extra ...string) (string, string, int) {
		t.Helper()
		var out, errb bytes.Buffer
		cmd := exec.Command(bin, append(args, extra...)...)
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return out.String(), errb.String(), code
	}
	whole, _, code := runBin()
	if code != 0 {
		t.Fatalf("uninterrupted run: status %d", code)
	}
	for _, sig := range []struct {
		s    syscall.Signal
		code int
	}{{syscall.SIGTERM, 143}, {syscall.SIGINT, 130}} {
		dir := t.TempDir()
		var out, errb bytes.Buffer
		cmd := exec.Command(bin, append(args, "--checkpoint-dir", dir, "--checkpoint-every", "40")...)
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// wait for the first checkpoint (step 40): the run is mid-epoch
		deadline := time.Now().Add(60 * time.Second)
		for {
			if ents, _ := os.ReadDir(dir); len(ents) > 0 {
				break
			}
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				t.Fatalf("no checkpoint after 60 s:\n%s%s", out.String(), errb.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
		cmd.Process.Signal(sig.s)
		err := cmd.Wait()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != sig.code {
			t.Fatalf("%v: exit %v, want status %d\n%s%s", sig.s, err, sig.code, out.String(), errb.String())
		}
		if !strings.Contains(errb.String(), "checkpoint written to") || strings.Contains(errb.String(), "goroutine") {
			t.Errorf("%v: stderr does not say where the checkpoint is (or shows a trace):\n%s", sig.s, errb.String())
		}
		resumed, _, code := runBin("--checkpoint-dir", dir, "--resume")
		if code != 0 {
			t.Fatalf("%v: resume: status %d", sig.s, code)
		}
		rw, rr := result(t, whole), result(t, resumed)
		if rw["final_loss"] != rr["final_loss"] || rw["steps"] != rr["steps"] {
			t.Errorf("%v then resume: final_loss %s after %s steps; uninterrupted %s after %s", sig.s, rr["final_loss"], rr["steps"], rw["final_loss"], rw["steps"])
		}
		t.Logf("%v: %s", sig.s, strings.TrimSpace(errb.String()))
	}
}

// --csv pointed at a file that is not a headroom log (a user's data set)
// fails before training and leaves the file byte-identical; a log headroom
// wrote is appended to.
func TestCSVNeverDamagesAFile(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "iris.csv")
	orig := []byte("sepal_length,sepal_width,label\n5.1,3.5,setosa\n4.9,3.0,setosa\n")
	if err := os.WriteFile(data, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	status, stdout, stderr := run(t, "train", "--epochs", "1", "--csv", data)
	if status == 0 || !strings.Contains(stderr, "not a headroom CSV log") || strings.Contains(stdout, "RESULT") {
		t.Errorf("--csv on a data file: status %d, stderr %q; want a refusal before training", status, stderr)
	}
	if got, _ := os.ReadFile(data); !bytes.Equal(got, orig) {
		t.Errorf("the data file changed:\n%s", got)
	}
	logPath := filepath.Join(dir, "log.csv")
	for i := 0; i < 2; i++ {
		if status, _, stderr := run(t, "train", "--epochs", "2", "--quiet", "--csv", logPath); status != 0 {
			t.Fatalf("--csv on a new path (run %d): status %d: %s", i+1, status, stderr)
		}
	}
	got, _ := os.ReadFile(logPath)
	if lines := strings.Split(strings.TrimSpace(string(got)), "\n"); len(lines) != 5 || !strings.HasPrefix(lines[0], "epoch,loss") {
		t.Errorf("two runs of two epochs: the log has %d lines, want a header and 4 rows:\n%s", len(lines), got)
	}
}
