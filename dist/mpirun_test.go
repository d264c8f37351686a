package dist

// These tests run the MPI communicator for real: they build
// internal/testprog with -tags mpi and launch it under mpirun. They need no
// build tag themselves, so the default `go test ./dist/...` runs them; they
// fail, saying what to install, when Open MPI is missing.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const installHint = "the distributed tests need Open MPI: install it with `apt-get install openmpi-bin libopenmpi-dev pkg-config` (as root)"

var programs struct {
	sync.Mutex
	dir   string
	built map[bool]string // by "built with -tags mpi"
}

func TestMain(m *testing.M) {
	code := m.Run()
	if programs.dir != "" {
		os.RemoveAll(programs.dir)
	}
	os.Exit(code)
}

// testprog builds internal/testprog (with -tags mpi if mpi, with -race if
// this test binary has it) once per test binary and returns its path, a
// name unique to this run so that leftover processes can be found by it.
func testprog(t *testing.T, mpi bool) string {
	t.Helper()
	if _, err := exec.LookPath("mpirun"); err != nil {
		t.Fatalf("mpirun not found on PATH: %s", installHint)
	}
	programs.Lock()
	defer programs.Unlock()
	if p, ok := programs.built[mpi]; ok {
		return p
	}
	if programs.dir == "" {
		dir, err := os.MkdirTemp("", "headroom-dist-test-")
		if err != nil {
			t.Fatal(err)
		}
		programs.dir, programs.built = dir, map[bool]string{}
	}
	name := "testprog-nompi"
	args := []string{"build"}
	if mpi {
		name = "testprog-mpi"
		args = append(args, "-tags", "mpi")
	}
	if raceEnabled {
		args = append(args, "-race")
	}
	out := filepath.Join(programs.dir, fmt.Sprintf("headroom-dist-%s-%d", name, os.Getpid()))
	args = append(args, "-o", out, "./internal/testprog")
	cmd := exec.Command(goTool(), args...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1") // whatever the caller's default build uses
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s\nthe mpi build needs cgo, a C compiler, pkg-config and Open MPI's headers; %s",
			strings.Join(args, " "), err, msg, installHint)
	}
	programs.built[mpi] = out
	return out
}

func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(os.Getenv("GOROOT"), "bin", "go")
}

// launched is the outcome of one mpirun.
type launched struct {
	out  string
	code int       // mpirun's exit status
	end  time.Time // when mpirun returned
}

// mpirun runs prog on np ranks (at most 60 s), then checks that no process
// of prog is left running.
func mpirun(t *testing.T, np int, prog string, args ...string) launched {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	argv := append([]string{"--oversubscribe", "--bind-to", "none", "-np", strconv.Itoa(np), prog}, args...)
	cmd := exec.CommandContext(ctx, "mpirun", argv...)
	cmd.Env = append(os.Environ(), "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	r := launched{out: string(out), end: time.Now()}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	default:
		t.Fatalf("mpirun %s: %v\n%s", strings.Join(argv, " "), err, out)
	}
	if ctx.Err() != nil {
		t.Errorf("mpirun %s: still running after 60 s, killed\n%s", strings.Join(argv, " "), out)
	}
	if left := leftovers(prog); len(left) > 0 {
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		t.Errorf("processes of %s left running after mpirun returned: pids %v (killed now)", filepath.Base(prog), left)
	}
	return r
}

// leftovers returns the pids of processes running prog, waiting up to 3 s
// for them to go (the launcher may still be reaping them).
func leftovers(prog string) []int {
	deadline := time.Now().Add(3 * time.Second)
	for {
		var pids []int
		dirs, _ := os.ReadDir("/proc")
		for _, d := range dirs {
			pid, err := strconv.Atoi(d.Name())
			if err != nil {
				continue
			}
			cmdline, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
			if err == nil && strings.HasPrefix(string(cmdline), prog+"\x00") {
				stat, _ := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
				if !isZombie(string(stat)) {
					pids = append(pids, pid)
				}
			}
		}
		if len(pids) == 0 || time.Now().After(deadline) {
			return pids
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// isZombie reads the state field of /proc/PID/stat ("pid (comm) S ...").
func isZombie(stat string) bool {
	i := strings.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}

func TestMPICollectives(t *testing.T) {
	prog := testprog(t, true)
	for _, np := range []int{2, 3} {
		t.Run(fmt.Sprintf("np=%d", np), func(t *testing.T) {
			r := mpirun(t, np, prog)
			if r.code != 0 {
				t.Fatalf("mpirun exit status: got %d, want 0\n%s", r.code, r.out)
			}
			for rank := range np {
				want := fmt.Sprintf("testprog: rank %d of %d: ok", rank, np)
				if !strings.Contains(r.out, want) {
					t.Errorf("output lacks %q\n%s", want, r.out)
				}
			}
		})
	}
}

// TestMPIWithoutTag: a binary built without -tags mpi refuses to run as one
// of several launched processes.
func TestMPIWithoutTag(t *testing.T) {
	prog := testprog(t, false)
	r := mpirun(t, 2, prog)
	if r.code == 0 {
		t.Errorf("mpirun exit status: got 0, want non-zero\n%s", r.out)
	}
	if want := "built without -tags mpi"; !strings.Contains(r.out, want) {
		t.Errorf("output lacks %q\n%s", want, r.out)
	}
}

// TestMPIFailure: one rank fails mid-way through a loop of all-reduces; the
// job must end non-zero within the timeout, with a message naming the
// failed rank, and leave no process behind (checked by mpirun).
func TestMPIFailure(t *testing.T) {
	prog := testprog(t, true)
	const timeout = 2 * time.Second
	// slack covers mpirun's reaction and tear-down after the timeout (about
	// 1 s measured) on a loaded machine.
	const slack = 10 * time.Second
	for _, tc := range []struct {
		how        string
		np, victim int
		names      *regexp.Regexp // a message naming the victim
	}{
		// mpirun ends the job itself and names the rank.
		{"kill", 2, 1, regexp.MustCompile(`process rank 1 with PID \d+ on node \S+ exited on signal 9`)},
		{"exit", 2, 1, regexp.MustCompile(`Process name: \[\[\d+,\d+\],1\]\s+Exit code:\s+3`)},
		// The victim is alive (its communicator answers) or frozen, so only
		// dist's watchdog can end the job.
		{"hang", 2, 1, regexp.MustCompile(`dist: rank 0: AllReduceSum #21 did not complete in 2s; rank\(s\) 1 did not arrive \(rank 1 last entered AllReduceSum #20\)`)},
		{"stop", 2, 1, regexp.MustCompile(`dist: rank 0: AllReduceSum #21 did not complete in 2s; rank\(s\) 1 did not arrive \(rank 1 did not answer`)},
		{"hang", 3, 2, regexp.MustCompile(`dist: rank [01]: AllReduceSum #21 did not complete in 2s; rank\(s\) 2 did not arrive \(rank 2 last entered AllReduceSum #20\)`)},
		// Both ranks time out; whichever prints first names the other.
		{"mismatch", 2, 1, regexp.MustCompile(`different collectives \((rank 1 entered Broadcast|rank 0 entered AllReduceSum)\)`)},
	} {
		t.Run(fmt.Sprintf("%s/np=%d", tc.how, tc.np), func(t *testing.T) {
			r := mpirun(t, tc.np, prog, "-mode", "fail", "-how", tc.how, "-victim", strconv.Itoa(tc.victim), "-at", "20", "-timeout", timeout.String())
			if r.code == 0 {
				t.Errorf("mpirun exit status: got 0, want non-zero")
			}
			if !tc.names.MatchString(r.out) {
				t.Errorf("output does not name rank %d: want a match for %q", tc.victim, tc.names)
			}
			m := regexp.MustCompile(fmt.Sprintf(`testprog: rank %d: failing \(%s\) at (\d+)`, tc.victim, tc.how)).FindStringSubmatch(r.out)
			if m == nil {
				t.Fatalf("output lacks the victim's failure line\n%s", r.out)
			}
			ms, _ := strconv.ParseInt(m[1], 10, 64)
			took := r.end.Sub(time.UnixMilli(ms))
			t.Logf("rank %d of %d failed (%s); mpirun exited with status %d %v later", tc.victim, tc.np, tc.how, r.code, took.Round(time.Millisecond))
			if took > timeout+slack {
				t.Errorf("the job ended %v after rank %d failed: want at most the timeout %v (+ %v slack)", took, tc.victim, timeout, slack)
			}
			if t.Failed() {
				t.Logf("output:\n%s", r.out)
			}
		})
	}
}
