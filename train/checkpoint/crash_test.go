package checkpoint

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/headroom-ml/headroom/internal/atomicfile"
)

// The crash test (issue 3, acceptance 6): a writer process saves checkpoints
// in a loop and is killed with SIGKILL at random moments; after every kill
// the newest checkpoint must load and hold exactly its step's content.
const (
	helperEnv  = "HEADROOM_CHECKPOINT_HELPER_DIR"
	crashKills = 50
	crashSeed  = 20240603
	crashRows  = 384 // two float32 [384, 1024] tensors: 3 MiB per checkpoint
	crashKeep  = 3
	maxDelay   = 120 * time.Millisecond
)

// TestHelperProcess is the writer of TestCrashSafety, run in a child process
// (the os/exec pattern: the test binary re-executed with -test.run). Without
// the environment variable it does nothing. It resumes after the newest
// checkpoint and writes one per step until it is killed, printing "ready"
// once it has found where to resume and "saved <step>" after each SaveStep
// returns.
func TestHelperProcess(t *testing.T) {
	dir := os.Getenv(helperEnv)
	if dir == "" {
		return
	}
	step := int64(0)
	_, last, err := Latest(dir)
	switch {
	case err == nil:
		step = last + 1
	case !errors.Is(err, fs.ErrNotExist):
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(3)
	}
	fmt.Println("ready")
	for ; ; step++ {
		entries, meta := stepEntries(step, crashRows)
		if _, err := SaveStep(dir, step, entries, meta, crashKeep); err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			os.Exit(2)
		}
		fmt.Printf("saved %d\n", step)
	}
}

func TestCrashSafety(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(crashSeed, 0))
	latest := int64(-1) // newest step Latest returned so far
	var saves, midWrite int
	for kill := range crashKills {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), helperEnv+"="+dir)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		ready := make(chan struct{})
		reported := make(chan [2]int64, 1) // newest step reported saved, count
		go func() {
			last, n := int64(-1), int64(0)
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				var s int64
				if sc.Text() == "ready" {
					close(ready)
				} else if _, err := fmt.Sscanf(sc.Text(), "saved %d", &s); err == nil {
					last, n = s, n+1
				}
			}
			reported <- [2]int64{last, n}
		}()

		// The delay starts once the writer is running, so that the kills
		// land in the write loop whatever the process start-up costs.
		select {
		case <-ready:
		case <-reported:
			cmd.Wait()
			t.Fatalf("kill %d: the writer ended before it was ready:\n%s", kill, stderr.String())
		}
		time.Sleep(time.Duration(rng.Int64N(int64(maxDelay))))
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatalf("kill %d: %v", kill, err)
		}
		r := <-reported // the pipe closes when the process dies
		werr := cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("kill %d: the writer ended by itself (%v), not by SIGKILL:\n%s", kill, werr, stderr.String())
		}
		saves += int(r[1])
		sawTemp := false
		for _, n := range dirNames(t, dir) {
			_, temp := atomicfile.ParseTemp(n)
			sawTemp = sawTemp || temp
			// Not only the newest: every file under a checkpoint name is
			// complete (a fallback in Latest must never be needed).
			if s, ok := parseStepName(n); ok {
				checkStepFile(t, StepPath(dir, s), s, crashRows)
			}
		}
		if sawTemp {
			midWrite++
		}

		// Every step reported saved is durable; one more may have been
		// renamed into place just before the kill, unreported.
		known := max(latest, r[0])
		path, step, err := Latest(dir)
		if err != nil {
			if known < 0 && errors.Is(err, fs.ErrNotExist) {
				continue // killed before its first checkpoint
			}
			t.Fatalf("kill %d: Latest: %v (newest known step %d)", kill, err, known)
		}
		if step < known || step > known+1 {
			t.Fatalf("kill %d: Latest is step %d, want %d or %d", kill, step, known, known+1)
		}
		checkStepFile(t, path, step, crashRows)
		latest = step
	}
	t.Logf("%d kills, %d checkpoints saved, newest step %d, %d kills left a temporary file (killed mid-write)", crashKills, saves, latest, midWrite)
	// The test proves something only if kills hit both sides of a rename.
	if latest < 0 || midWrite == 0 {
		t.Fatalf("got %d completed steps and %d kills during a write, want both above 0", latest+1, midWrite)
	}

	// The next save cleans up what the kills left: keep checkpoints, no
	// temporary files.
	entries, meta := stepEntries(latest+1, crashRows)
	if _, err := SaveStep(dir, latest+1, entries, meta, crashKeep); err != nil {
		t.Fatal(err)
	}
	names := dirNames(t, dir)
	if len(names) != min(crashKeep, int(latest+2)) {
		t.Errorf("after a clean save: got files %q, want the %d newest checkpoints only", names, crashKeep)
	}
	for _, n := range names {
		if _, ok := parseStepName(n); !ok {
			t.Errorf("after a clean save: got %s, want checkpoints only", n)
		}
	}
}
