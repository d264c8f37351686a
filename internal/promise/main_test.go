package promise

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// bin is the headroom command TestMain built for this run of the tests.
var bin string

// runTimeout bounds one headroom process: every run here is seconds long
// on an idle machine, so one past this has hung.
const runTimeout = 3 * time.Minute

func TestMain(m *testing.M) {
	if spec := os.Getenv(neighbourEnv); spec != "" { // a neighbour process, not the tests
		os.Exit(neighbour(spec))
	}
	dir, err := os.MkdirTemp("", "headroom-promise-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "promise:", err)
		os.Exit(2)
	}
	status := 2
	if bin, err = build(dir); err != nil {
		fmt.Fprintln(os.Stderr, "promise:", err)
	} else {
		status = m.Run()
	}
	os.RemoveAll(dir)
	os.Exit(status)
}

// build runs `go build -o dir/headroom ./cmd/headroom` in the module's root.
func build(dir string) (string, error) {
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	out := filepath.Join(dir, "headroom")
	cmd := exec.Command("go", "build", "-o", out, "./cmd/headroom")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build -o %s ./cmd/headroom in %s: %v\n%s", out, root, err, b)
	}
	return out, nil
}

// run is one finished headroom process.
type run struct {
	args           []string
	status         int // the exit status; 128+n when signal n ended the process (137: SIGKILL, the OOM killer's)
	stdout, stderr string
	wall           time.Duration
}

// String is the command as a user would type it.
func (r *run) String() string { return "headroom " + strings.Join(r.args, " ") }

// output is stdout and stderr for a failure message, each cut to its last
// 40 lines.
func (r *run) output() string {
	return fmt.Sprintf("--- stdout:\n%s--- stderr:\n%s", tail(r.stdout, 40), tail(r.stderr, 40))
}

func tail(s string, n int) string {
	lines := strings.SplitAfter(s, "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("[%d lines]\n", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "")
}

// headroom runs the command with args and waits for it.
func headroom(t *testing.T, args ...string) *run {
	t.Helper()
	return wait(t, args, start(t, exec.Command(bin, args...), args))
}

// started is a headroom process that runs while the test goes on.
type started struct {
	cmd            *exec.Cmd
	stdout, stderr *bytes.Buffer
	begun          time.Time
	exited         chan struct{} // closed when the process has ended and err is set
	err            error
}

// start starts cmd (headroom with args, perhaps through a cgroup's shell),
// collecting its output. The process is killed if it outlives runTimeout
// or the test.
func start(t *testing.T, cmd *exec.Cmd, args []string) *started {
	t.Helper()
	p := &started{cmd: cmd, stdout: new(bytes.Buffer), stderr: new(bytes.Buffer), exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.stdout, p.stderr
	p.begun = time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("headroom %s: %v", strings.Join(args, " "), err)
	}
	go func() { p.err = cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			cmd.Process.Kill()
			<-p.exited
		}
	})
	return p
}

// wait waits for p to end and returns how it ended. A process that runs
// past runTimeout is killed and fails the test.
func wait(t *testing.T, args []string, p *started) *run {
	t.Helper()
	select {
	case <-p.exited:
	case <-time.After(runTimeout - time.Since(p.begun)):
		p.cmd.Process.Kill()
		<-p.exited
		t.Fatalf("headroom %s: still running after %v, killed\n--- stdout:\n%s--- stderr:\n%s",
			strings.Join(args, " "), runTimeout, tail(p.stdout.String(), 40), tail(p.stderr.String(), 40))
	}
	r := &run{args: args, stdout: p.stdout.String(), stderr: p.stderr.String(), wall: time.Since(p.begun)}
	var ee *exec.ExitError
	switch err := p.err; {
	case err == nil:
	case errors.As(err, &ee):
		r.status = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			r.status = 128 + int(ws.Signal())
		}
	default:
		t.Fatalf("%s: %v", r, p.err)
	}
	for _, s := range []string{r.stdout, r.stderr} {
		for _, bad := range []string{"goroutine ", "panic:", "internal error"} {
			if strings.Contains(s, bad) {
				t.Errorf("%s: the output shows %q, a crash:\n%s", r, bad, r.output())
			}
		}
	}
	return r
}

// ok fails the test unless r exited 0.
func (r *run) ok(t *testing.T) {
	t.Helper()
	if r.status != 0 {
		t.Fatalf("%s: got status %d, want 0\n%s", r, r.status, r.output())
	}
}

// result returns the key=value fields of r's one RESULT line.
func (r *run) result(t *testing.T) map[string]string {
	t.Helper()
	var lines []string
	for _, l := range strings.Split(r.stdout, "\n") {
		if strings.HasPrefix(l, "RESULT ") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 {
		t.Fatalf("%s: got %d RESULT lines, want 1\n%s", r, len(lines), r.output())
	}
	m := map[string]string{}
	for _, f := range strings.Fields(strings.TrimPrefix(lines[0], "RESULT ")) {
		k, v, ok := strings.Cut(f, "=")
		if !ok || k == "" || v == "" {
			t.Fatalf("%s: RESULT field %q is not key=value: %s", r, f, lines[0])
		}
		m[k] = v
	}
	for _, k := range []string{"final_loss", "steps", "samples_per_sec", "planned_peak_bytes", "measured_peak_bytes"} {
		if m[k] == "" {
			t.Fatalf("%s: RESULT has no %s=: %s", r, k, lines[0])
		}
	}
	return m
}

// bytesField returns an integer field of a RESULT line.
func bytesField(t *testing.T, r *run, res map[string]string, key string) int64 {
	t.Helper()
	v, err := strconv.ParseInt(res[key], 10, 64)
	if err != nil {
		t.Fatalf("%s: RESULT %s=%q, want an integer", r, key, res[key])
	}
	return v
}

// checkPlanned checks the first promise on a finished run's RESULT:
// planned_peak_bytes equals measured_peak_bytes, and is positive.
func checkPlanned(t *testing.T, r *run, res map[string]string) {
	t.Helper()
	planned, measured := bytesField(t, r, res, "planned_peak_bytes"), bytesField(t, r, res, "measured_peak_bytes")
	if planned <= 0 || planned != measured {
		t.Errorf("%s: got planned_peak_bytes=%d measured_peak_bytes=%d, want them equal (and positive)", r, planned, measured)
	}
}

// checkSpeed checks that a run reports the speed it trained at.
func checkSpeed(t *testing.T, r *run, res map[string]string) {
	t.Helper()
	v, err := strconv.ParseFloat(res["samples_per_sec"], 64)
	if err != nil || !(v > 0) || v > 1e12 {
		t.Errorf("%s: got samples_per_sec=%s (steps=%s), want a positive number", r, res["samples_per_sec"], res["steps"])
	}
	if tok, ok := res["tokens_per_sec"]; ok {
		if v, err := strconv.ParseFloat(tok, 64); err != nil || !(v > 0) || v > 1e12 {
			t.Errorf("%s: got tokens_per_sec=%s (steps=%s), want a positive number", r, tok, res["steps"])
		}
	}
}

// planLine starts the plan every run prints before step 1.
const planLine = "memory plan (known before step 1)"

// checkPlanFirst checks that the run printed its memory plan before its
// first epoch line.
func checkPlanFirst(t *testing.T, r *run) {
	t.Helper()
	plan := strings.Index(r.stdout, planLine)
	epoch := strings.Index(r.stdout, "\nepoch ")
	if plan < 0 || (epoch >= 0 && epoch < plan) {
		t.Errorf("%s: got the plan at byte %d of stdout and the first epoch line at %d, want %q before step 1\n%s",
			r, plan, epoch, planLine, r.output())
	}
}

// trained checks a run that must train: status 0, the plan printed before
// step 1, one RESULT line, planned equals measured, a positive speed. It
// returns the RESULT's fields.
func trained(t *testing.T, r *run) map[string]string {
	t.Helper()
	r.ok(t)
	checkPlanFirst(t, r)
	res := r.result(t)
	checkPlanned(t, r, res)
	checkSpeed(t, r, res)
	return res
}

// startedTraining reports whether stdout shows an epoch line or a RESULT.
func startedTraining(stdout string) bool {
	for _, l := range strings.Split(stdout, "\n") {
		if strings.HasPrefix(l, "epoch ") || strings.HasPrefix(l, "RESULT ") {
			return true
		}
	}
	return false
}
