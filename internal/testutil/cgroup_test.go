//go:build linux

package testutil

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// childEnv tells this test binary, run again by a test below, what to do
// as the child (TestCgroupChild): "alloc=N" touches N bytes, "limit" prints
// CgroupMemoryLimit.
const childEnv = "HEADROOM_TESTUTIL_CGROUP_CHILD"

// TestCgroupChild is the child's side; run plainly it does nothing.
func TestCgroupChild(t *testing.T) {
	mode := os.Getenv(childEnv)
	switch {
	case mode == "":
		return
	case mode == "limit":
		n, limited, err := CgroupMemoryLimit()
		fmt.Printf("LIMIT %d %v %v\n", n, limited, err)
	case strings.HasPrefix(mode, "alloc="):
		n, err := strconv.Atoi(strings.TrimPrefix(mode, "alloc="))
		if err != nil {
			t.Fatal(err)
		}
		// mapped outside the Go heap: no garbage collector and, under -race,
		// no shadow memory add to what the child holds
		b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n; i += 4096 {
			b[i] = 1 // make every page resident
		}
		fmt.Printf("ALLOCATED %d\n", n)
	default:
		t.Fatalf("%s=%q: unknown mode", childEnv, mode)
	}
}

// child returns a command that runs this test binary's TestCgroupChild in
// cg (outside any test cgroup where cg is nil) with the given mode.
func child(cg *MemoryCgroup, mode string) *exec.Cmd {
	args := []string{"-test.run=^TestCgroupChild$", "-test.count=1"}
	var cmd *exec.Cmd
	if cg == nil {
		cmd = exec.Command(os.Args[0], args...)
	} else {
		cmd = cg.Command(os.Args[0], args...)
	}
	cmd.Env = append(os.Environ(), childEnv+"="+mode)
	return cmd
}

// TestMemoryCgroupOOMKill proves the harness sees a kill: a child touching
// 300 MiB in a 200 MiB cgroup is killed by the OOM killer (SIGKILL), and
// OOMKills and Peak say so.
func TestMemoryCgroupOOMKill(t *testing.T) {
	const limit = 200 << 20
	cg := NewMemoryCgroup(t, limit)
	out, err := child(cg, "alloc="+strconv.Itoa(300<<20)).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("got error %v, want the child killed; output:\n%s", err, out)
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("got %v, want the child killed by SIGKILL; output:\n%s", ee, out)
	}
	if strings.Contains(string(out), "ALLOCATED") {
		t.Errorf("got %q, want the child killed before it finished", out)
	}
	kills, err := cg.OOMKills()
	if err != nil || kills != 1 {
		t.Errorf("OOMKills: got %d, %v; want 1", kills, err)
	}
	// the kernel may record a charge that it then fails and reclaims:
	// seen on cgroup v1, a peak one page over the limit. Allow one charge
	// batch (32 pages of 4 KiB).
	const slack = 32 << 12
	peak, err := cg.Peak()
	if err != nil || peak > limit+slack || peak < limit*9/10 {
		t.Errorf("Peak: got %d, %v; want the limit %d, just below or at most %d bytes over", peak, err, limit, slack)
	}
	t.Logf("cgroup v%d %s: peak %d bytes, %d OOM kill(s)", cg.Version, cg.Path, peak, kills)
}

// TestMemoryCgroupPeak: a child touching 100 MiB in a 200 MiB cgroup ends
// normally, with a peak of at least 100 MiB and no OOM kill.
func TestMemoryCgroupPeak(t *testing.T) {
	const limit, n = 200 << 20, 100 << 20
	cg := NewMemoryCgroup(t, limit)
	out, err := child(cg, "alloc="+strconv.Itoa(n)).CombinedOutput()
	if err != nil || !strings.Contains(string(out), fmt.Sprintf("ALLOCATED %d", n)) {
		t.Fatalf("got %v, want the child to allocate %d bytes; output:\n%s", err, n, out)
	}
	peak, err := cg.Peak()
	if err != nil || peak < n || peak > limit {
		t.Errorf("Peak: got %d, %v; want between %d and %d", peak, err, n, limit)
	}
	if kills, err := cg.OOMKills(); err != nil || kills != 0 {
		t.Errorf("OOMKills: got %d, %v; want 0", kills, err)
	}
	u, err := cg.Usage()
	if err != nil || u < 0 || u > limit {
		t.Errorf("Usage: got %d, %v; want between 0 and %d", u, err, limit)
	}
	t.Logf("cgroup v%d %s: peak %d bytes, usage after exit %d", cg.Version, cg.Path, peak, u)
}

// TestMemoryCgroupPlaces makes a cgroup under this process's own cgroup and
// under the root of the hierarchy; a command started in each runs in it,
// under its limit (as the kernel, not the harness, reports it).
func TestMemoryCgroupPlaces(t *testing.T) {
	h, err := findMemoryHierarchy()
	if err != nil {
		t.Skipf("no memory cgroup: %v", err)
	}
	t.Logf("memory controller: cgroup v%d at %s, this process in %s", h.version, h.mountPoint, h.own)
	for _, tc := range []struct{ name, parent string }{{"own", h.own}, {"root", h.mountRoot}} {
		t.Run(tc.name, func(t *testing.T) {
			const limit = 64 << 20
			cg, err := newMemoryCgroupIn(t, h, tc.parent, limit)
			if errors.Is(err, fs.ErrPermission) || (err != nil && h.version == 2) {
				t.Skipf("cannot make a cgroup under %s here: %v", tc.parent, err)
			}
			if err != nil {
				t.Fatalf("making a cgroup under %s: %v", tc.parent, err)
			}
			if want := filepath.Join(tc.parent, filepath.Base(cg.Dir)); cg.Path != want {
				t.Errorf("Path: got %q, want %q", cg.Path, want)
			}
			out, err := cg.Command("cat", "/proc/self/cgroup").Output()
			if err != nil {
				t.Fatalf("cat /proc/self/cgroup in the cgroup: %v", err)
			}
			want := ":memory:" + cg.Path
			if h.version == 2 {
				want = "0::" + cg.Path
			}
			if !strings.Contains(string(out), want+"\n") {
				t.Errorf("got /proc/self/cgroup\n%s\nwant a line ending %q", out, want)
			}
			out, err = child(cg, "limit").Output()
			if got, want := firstLine(out, "LIMIT "), fmt.Sprintf("%d true <nil>", limit); err != nil || got != want {
				t.Errorf("CgroupMemoryLimit in the cgroup: got %q (%v), want %q", got, err, want)
			}
		})
	}
}

// TestMemoryCgroupCleanup: a cgroup is gone when its test ends, and a
// process left running in it has been killed.
func TestMemoryCgroupCleanup(t *testing.T) {
	var dir string
	var cmd *exec.Cmd
	t.Run("make", func(t *testing.T) {
		cg := NewMemoryCgroup(t, 32<<20)
		dir = cg.Dir
		cmd = cg.Command("sleep", "600")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for { // until the shell has moved itself in (it then execs sleep)
			pids, err := cg.pids()
			if err != nil {
				t.Fatal(err)
			}
			if slices.Contains(pids, cmd.Process.Pid) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("process %d not in %s after 10s: %v", cmd.Process.Pid, cg.Dir, pids)
			}
			time.Sleep(time.Millisecond)
		}
	})
	if dir == "" {
		t.Skip("no cgroup was made")
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("after the test: stat %s: got %v, want it removed", dir, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Errorf("the process left in it: got %v, want killed by SIGKILL", err)
		}
	case <-time.After(10 * time.Second):
		t.Errorf("the process left in it (pid %d) still runs 10s after the test", cmd.Process.Pid)
		cmd.Process.Kill()
		<-done
	}
}

// TestCgroupMemoryLimitHere: outside any test cgroup the child reads the same
// limit as this process.
func TestCgroupMemoryLimitHere(t *testing.T) {
	n, limited, err := CgroupMemoryLimit()
	if err != nil {
		t.Fatal(err)
	}
	out, err := child(nil, "limit").Output()
	if got, want := firstLine(out, "LIMIT "), fmt.Sprintf("%d %v <nil>", n, limited); err != nil || got != want {
		t.Errorf("got %q (%v), want %q", got, err, want)
	}
}

func firstLine(out []byte, prefix string) string {
	for _, l := range strings.Split(string(out), "\n") {
		if s, ok := strings.CutPrefix(l, prefix); ok {
			return s
		}
	}
	return ""
}

func TestParseMemoryHierarchy(t *testing.T) {
	const v2Mount = "34 24 0:28 / /sys/fs/cgroup rw,nosuid shared:9 - cgroup2 cgroup2 rw,nsdelegate\n"
	for _, tc := range []struct {
		name, cgroups, mountinfo string
		want                     cgroupHierarchy
		dir                      string // want.dir(want.own)
		ancestors                []string
	}{
		{"hybrid, memory on v1", "4:memory:/process_api/x\n1:cpu:/\n0::/\n",
			"35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n",
			cgroupHierarchy{1, "/sys/fs/cgroup/memory", "/", "/process_api/x"}, "/sys/fs/cgroup/memory/process_api/x", []string{"/process_api/x", "/process_api", "/"}},
		{"v2 with systemd", "0::/user.slice/user-0.slice/session-1.scope\n", v2Mount,
			cgroupHierarchy{2, "/sys/fs/cgroup", "/", "/user.slice/user-0.slice/session-1.scope"}, "/sys/fs/cgroup/user.slice/user-0.slice/session-1.scope",
			[]string{"/user.slice/user-0.slice/session-1.scope", "/user.slice/user-0.slice", "/user.slice", "/"}},
		{"docker on v1", "11:memory:/docker/abc\n0::/system.slice/containerd.service\n",
			"1135 1132 0:29 /docker/abc /sys/fs/cgroup/memory ro - cgroup cgroup rw,memory\n" + v2Mount,
			cgroupHierarchy{1, "/sys/fs/cgroup/memory", "/docker/abc", "/docker/abc"}, "/sys/fs/cgroup/memory", []string{"/docker/abc"}},
		{"escaped mount point", "4:memory:/a\n", `35 31 0:32 / /mnt/mem\040cg rw - cgroup cgroup rw,memory` + "\n",
			cgroupHierarchy{1, "/mnt/mem cg", "/", "/a"}, "/mnt/mem cg/a", []string{"/a", "/"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseMemoryHierarchy(tc.cgroups, tc.mountinfo)
			if err != nil || got != tc.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
			if d := got.dir(got.own); d != tc.dir {
				t.Errorf("dir: got %q, want %q", d, tc.dir)
			}
			if a := got.ancestors(); !slices.Equal(a, tc.ancestors) {
				t.Errorf("ancestors: got %q, want %q", a, tc.ancestors)
			}
		})
	}
	for _, tc := range []struct{ name, cgroups, mountinfo string }{
		{"v1 memory not mounted", "4:memory:/a\n0::/\n", v2Mount},
		{"another part of the hierarchy", "4:memory:/dockerx\n", "35 31 0:32 /docker /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"},
		{"no memory cgroup", "1:cpu:/\n", v2Mount},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, err := parseMemoryHierarchy(tc.cgroups, tc.mountinfo); err == nil {
				t.Errorf("got %+v, want an error", got)
			}
		})
	}
}

func TestUnescapeOctal(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"/sys/fs/cgroup", "/sys/fs/cgroup"},
		{`/a\040b\011c\012d\134e`, "/a b\tc\nd\\e"},
		{`/a\04`, `/a\04`},
		{`/a\999`, `/a\999`},
	} {
		if got := unescapeOctal(tc.in); got != tc.want {
			t.Errorf("unescapeOctal(%q): got %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestCgroupName(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"TestX/sub_test-1", "TestX_sub_test-1"},
		{"Test/a b#c", "Test_a_b_c"},
		{strings.Repeat("x", 50), strings.Repeat("x", 40)},
	} {
		if got := cgroupName(tc.in); got != tc.want {
			t.Errorf("cgroupName(%q): got %q, want %q", tc.in, got, tc.want)
		}
	}
}
