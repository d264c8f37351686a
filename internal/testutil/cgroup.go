package testutil

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// MemoryCgroup is a memory cgroup made for one test: a process started with
// Command runs inside it, under its limit, and the kernel's OOM killer acts
// when the process passes the limit. Swap is turned off for it (v1
// memory.swappiness 0 and memory.memsw.limit_in_bytes equal to the limit; v2
// memory.swap.max 0), so the limit is on resident memory and is not
// stretched by swapping.
type MemoryCgroup struct {
	Version int    // cgroup version of the memory controller: 1 or 2
	Dir     string // its directory: "/sys/fs/cgroup/memory/process_api/3ae8…/headroom-TestX-1234-1"
	Path    string // its path as /proc/<pid>/cgroup names it: "/process_api/3ae8…/headroom-TestX-1234-1"
	Limit   int64  // bytes
}

// cgroupHierarchy is where the memory controller of this process's cgroups
// is: the hierarchy's mount and the process's own cgroup in it.
type cgroupHierarchy struct {
	version    int
	mountPoint string // "/sys/fs/cgroup/memory"
	mountRoot  string // the cgroup the mount shows at its top: "/"
	own        string // this process's cgroup: "/process_api/3ae8…"
}

// dir is the directory of cgroup p, which lies under h.mountRoot.
func (h cgroupHierarchy) dir(p string) string {
	if h.mountRoot != "/" {
		p = strings.TrimPrefix(p, h.mountRoot)
	}
	return filepath.Join(h.mountPoint, p)
}

// ancestors lists h.own and the cgroups above it, up to the mount's top.
func (h cgroupHierarchy) ancestors() []string {
	var out []string
	for p := h.own; ; p = filepath.Dir(p) {
		out = append(out, p)
		if p == h.mountRoot || p == "/" {
			return out
		}
	}
}

// findMemoryHierarchy reads /proc/self/cgroup and /proc/self/mountinfo. It
// is a small second reading of what mem.ProcessLimit reads, kept apart so
// that tests of mem check it against something it does not share.
func findMemoryHierarchy() (cgroupHierarchy, error) {
	cgroups, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return cgroupHierarchy{}, err
	}
	mountinfo, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return cgroupHierarchy{}, err
	}
	return parseMemoryHierarchy(string(cgroups), string(mountinfo))
}

// parseMemoryHierarchy finds the memory controller's hierarchy from the
// text of /proc/self/cgroup and /proc/self/mountinfo: a v1 hierarchy with
// the controller, else the v2 one.
func parseMemoryHierarchy(cgroups, mountinfo string) (cgroupHierarchy, error) {
	var v1, v2 string
	for _, line := range strings.Split(strings.TrimSpace(cgroups), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			return cgroupHierarchy{}, fmt.Errorf("/proc/self/cgroup: line %q", line)
		}
		if f[0] == "0" {
			v2 = f[2]
		} else if hasWord(f[1], ",", "memory") {
			v1 = f[2]
		}
	}
	for _, line := range strings.Split(mountinfo, "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 2 {
			continue
		}
		h := cgroupHierarchy{mountRoot: unescapeOctal(f[3]), mountPoint: unescapeOctal(f[4])}
		switch {
		case v1 != "" && g[0] == "cgroup" && len(g) > 2 && hasWord(g[2], ",", "memory"):
			h.version, h.own = 1, v1
		case v1 == "" && v2 != "" && g[0] == "cgroup2":
			h.version, h.own = 2, v2
		default:
			continue
		}
		if h.own == h.mountRoot || h.mountRoot == "/" || strings.HasPrefix(h.own, h.mountRoot+"/") {
			return h, nil
		}
	}
	return cgroupHierarchy{}, errors.New("no memory cgroup controller is mounted where this process can see it (/proc/self/mountinfo)")
}

func hasWord(list, sep, w string) bool {
	for _, x := range strings.Split(list, sep) {
		if x == w {
			return true
		}
	}
	return false
}

// unescapeOctal undoes mountinfo's \ooo escapes (space, tab, newline, \).
func unescapeOctal(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

var cgroupSeq atomic.Int64

// NewMemoryCgroup makes a memory cgroup with a limit of limit bytes for the
// test, beside nothing else the machine runs: under the cgroup this process
// is in (or, on cgroup v2 where that cgroup holds processes and so cannot
// hand the memory controller down, under the nearest ancestor that can). It
// is removed when the test ends, after any process left in it is killed.
// The test is skipped, with the reason, where no cgroup can be made: not
// Linux, no memory controller mounted, no permission (not root).
func NewMemoryCgroup(t testing.TB, limit int64) *MemoryCgroup {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skipf("memory cgroups are Linux's; this is %s", runtime.GOOS)
	}
	h, err := findMemoryHierarchy()
	if err != nil {
		t.Skipf("no memory cgroup: %v", err)
	}
	var tries []string
	for _, p := range h.ancestors() {
		cg, err := newMemoryCgroupIn(t, h, p, limit)
		if err == nil {
			return cg
		}
		tries = append(tries, err.Error())
		if errors.Is(err, fs.ErrPermission) {
			break // an ancestor will not let us either
		}
	}
	t.Skipf("cannot make a memory cgroup (not root, or no controller to delegate): %s", strings.Join(tries, "; "))
	return nil
}

// newMemoryCgroupIn makes the cgroup as a child of cgroup parent of h. An
// error means nothing was left behind.
func newMemoryCgroupIn(t testing.TB, h cgroupHierarchy, parent string, limit int64) (_ *MemoryCgroup, err error) {
	t.Helper()
	pdir := h.dir(parent)
	enabled := false // whether this call enabled +memory in the parent's subtree_control
	if h.version == 2 {
		ctl, err := os.ReadFile(filepath.Join(pdir, "cgroup.controllers"))
		if err != nil {
			return nil, err
		}
		if !hasWord(strings.TrimSpace(string(ctl)), " ", "memory") {
			return nil, fmt.Errorf("%s: no memory controller in cgroup.controllers", pdir)
		}
		sub, err := os.ReadFile(filepath.Join(pdir, "cgroup.subtree_control"))
		if err != nil {
			return nil, err
		}
		if !hasWord(strings.TrimSpace(string(sub)), " ", "memory") {
			if err := os.WriteFile(filepath.Join(pdir, "cgroup.subtree_control"), []byte("+memory"), 0); err != nil {
				return nil, fmt.Errorf("enabling the memory controller for children of %s: %w", pdir, err)
			}
			enabled = true
		}
	}
	name := fmt.Sprintf("headroom-%s-%d-%d", cgroupName(t.Name()), os.Getpid(), cgroupSeq.Add(1))
	cg := &MemoryCgroup{Version: h.version, Dir: filepath.Join(pdir, name), Path: filepath.Join(parent, name), Limit: limit}
	if err := os.Mkdir(cg.Dir, 0o755); err != nil {
		if enabled {
			os.WriteFile(filepath.Join(pdir, "cgroup.subtree_control"), []byte("-memory"), 0)
		}
		return nil, err
	}
	t.Cleanup(func() { cg.remove(t, pdir, enabled) })
	n := strconv.FormatInt(limit, 10)
	var settings [][2]string // file, value, in order
	if h.version == 1 {
		// memsw (memory + swap) must be set after the memory limit, and
		// exists only where the kernel accounts swap.
		settings = [][2]string{{"memory.limit_in_bytes", n}, {"memory.swappiness", "0"}, {"memory.memsw.limit_in_bytes", n}}
	} else {
		settings = [][2]string{{"memory.max", n}, {"memory.swap.max", "0"}}
	}
	for _, s := range settings {
		f := filepath.Join(cg.Dir, s[0])
		if _, err := os.Stat(f); errors.Is(err, fs.ErrNotExist) && s[0] != "memory.limit_in_bytes" && s[0] != "memory.max" {
			continue // no swap accounting: nothing to turn off
		}
		if err := os.WriteFile(f, []byte(s[1]), 0); err != nil {
			t.Fatalf("setting %s to %s: %v", f, s[1], err)
		}
	}
	return cg, nil
}

// cgroupName keeps the letters, digits, - and _ of a test's name, at most 40.
func cgroupName(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == '-' || r == '_' || (r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') {
			return r
		}
		return '_'
	}, s)
	if len(s) > 40 {
		s = s[:40]
	}
	return s
}

// remove kills what is left in the cgroup, removes it, and gives the
// parent's subtree_control back as it was.
func (cg *MemoryCgroup) remove(t testing.TB, parentDir string, enabled bool) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		pids, err := cg.pids()
		if err != nil {
			t.Errorf("removing cgroup %s: %v", cg.Dir, err)
			return
		}
		if len(pids) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("removing cgroup %s: processes %v still in it after SIGKILL", cg.Dir, pids)
			return
		}
		for _, pid := range pids {
			if p, err := os.FindProcess(pid); err == nil {
				p.Kill() // only processes this test started are in its cgroup
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	for {
		err := os.Remove(cg.Dir)
		if err == nil || errors.Is(err, fs.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("removing cgroup %s: %v", cg.Dir, err)
			return
		}
		time.Sleep(10 * time.Millisecond) // exiting processes take a moment to leave
	}
	if enabled {
		if err := os.WriteFile(filepath.Join(parentDir, "cgroup.subtree_control"), []byte("-memory"), 0); err != nil {
			t.Logf("leaving +memory in %s/cgroup.subtree_control: %v", parentDir, err)
		}
	}
}

// pids lists the processes in the cgroup.
func (cg *MemoryCgroup) pids() ([]int, error) {
	b, err := os.ReadFile(filepath.Join(cg.Dir, "cgroup.procs"))
	if err != nil {
		return nil, err
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("%s/cgroup.procs: %q", cg.Dir, f)
		}
		out = append(out, pid)
	}
	return out, nil
}

// Command returns a command that runs name with arg inside the cgroup: a
// shell moves itself into the cgroup and then execs name (same process),
// so name runs nothing outside it. The Cmd's Path and Args are the
// shell's; set Env, Stdout and the rest as usual.
func (cg *MemoryCgroup) Command(name string, arg ...string) *exec.Cmd {
	return exec.Command("/bin/sh", append([]string{"-c", `echo $$ > "$0" && exec "$@"`, filepath.Join(cg.Dir, "cgroup.procs"), name}, arg...)...)
}

// Peak returns the most memory the cgroup has held (v1
// memory.max_usage_in_bytes, v2 memory.peak: Linux 5.19 or later).
func (cg *MemoryCgroup) Peak() (int64, error) {
	if cg.Version == 1 {
		return readNumber(filepath.Join(cg.Dir, "memory.max_usage_in_bytes"))
	}
	return readNumber(filepath.Join(cg.Dir, "memory.peak"))
}

// Usage returns the memory the cgroup holds now (v1 memory.usage_in_bytes,
// v2 memory.current).
func (cg *MemoryCgroup) Usage() (int64, error) {
	if cg.Version == 1 {
		return readNumber(filepath.Join(cg.Dir, "memory.usage_in_bytes"))
	}
	return readNumber(filepath.Join(cg.Dir, "memory.current"))
}

// OOMKills returns how many processes the OOM killer has killed in the
// cgroup (oom_kill of v1 memory.oom_control, Linux 4.13 or later, or of v2
// memory.events).
func (cg *MemoryCgroup) OOMKills() (int, error) {
	name := "memory.events"
	if cg.Version == 1 {
		name = "memory.oom_control"
	}
	n, err := readKey(filepath.Join(cg.Dir, name), "oom_kill")
	return int(n), err
}

// CgroupMemoryLimit returns the memory limit the kernel holds this process
// to through its cgroups, and false where none does (no memory cgroup, or
// no limit below the machine's MemTotal). On v1 it is the kernel's own
// minimum over the cgroup and its ancestors (hierarchical_memory_limit of
// memory.stat); on v2 the smallest memory.max of the cgroup and its
// ancestors. It is what a test compares mem.ProcessLimit with.
func CgroupMemoryLimit() (int64, bool, error) {
	if runtime.GOOS != "linux" {
		return 0, false, nil
	}
	total, err := readKey("/proc/meminfo", "MemTotal:")
	if err != nil {
		return 0, false, err
	}
	total *= 1024
	h, err := findMemoryHierarchy()
	if err != nil {
		return 0, false, nil
	}
	limit := int64(math.MaxInt64)
	if h.version == 1 {
		if limit, err = readKey(filepath.Join(h.dir(h.own), "memory.stat"), "hierarchical_memory_limit"); err != nil {
			return 0, false, err
		}
	} else {
		for _, p := range h.ancestors() {
			b, err := os.ReadFile(filepath.Join(h.dir(p), "memory.max"))
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return 0, false, err
			}
			if s := strings.TrimSpace(string(b)); s != "max" {
				n, err := strconv.ParseInt(s, 10, 64)
				if err != nil {
					return 0, false, fmt.Errorf("%s/memory.max: %q", h.dir(p), s)
				}
				limit = min(limit, n)
			}
		}
	}
	if limit >= total {
		return 0, false, nil
	}
	return limit, true, nil
}

// readNumber reads a file holding one decimal number.
func readNumber(name string) (int64, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	return n, nil
}

// readKey reads the number after key in a file of "key value" lines.
func readKey(name, key string) (int64, error) {
	f, err := os.Open(name)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k := strings.Fields(sc.Text())
		if len(k) >= 2 && k[0] == key {
			n, err := strconv.ParseInt(k[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s: %s: %w", name, key, err)
			}
			return n, nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	return 0, fmt.Errorf("%s: no %s line", name, key)
}

// MemoryCgroupVersion returns the cgroup version of the memory controller
// this process's cgroup is under (1 or 2), or an error where there is none.
func MemoryCgroupVersion() (int, error) {
	h, err := findMemoryHierarchy()
	if err != nil {
		return 0, err
	}
	return h.version, nil
}
