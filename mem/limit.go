package mem

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"strconv"
	"strings"
)

// ErrNoLimit is returned (wrapped) by ProcessLimit when no memory limit can
// be found for the process: no cgroup limit and no /proc/meminfo (as on
// systems other than Linux). A caller then runs without a default budget.
var ErrNoLimit = errors.New("mem: no memory limit known for this process")

// LimitKind says where a Limit was read from.
type LimitKind uint8

// The kinds of Limit. The cgroup kinds are a container's limit; the others
// are the machine's memory.
const (
	LimitNone          LimitKind = iota // no limit was read
	LimitCgroupV1                       // memory.limit_in_bytes of a cgroup v1 memory hierarchy
	LimitCgroupV2                       // memory.max of a cgroup v2 hierarchy
	LimitMemAvailable                   // MemAvailable of /proc/meminfo
	LimitMemFreeCached                  // MemFree + Cached of /proc/meminfo (kernels before 3.14 report no MemAvailable)
)

var limitKindNames = [...]string{"none", "cgroup v1", "cgroup v2", "MemAvailable", "MemFree + Cached"}

func (k LimitKind) String() string {
	if int(k) < len(limitKindNames) {
		return limitKindNames[k]
	}
	return "LimitKind(" + strconv.Itoa(int(k)) + ")"
}

// Limit is the memory limit the process lives under: the smallest memory
// limit of its cgroup and the cgroup's ancestors, or, where no cgroup limits
// it, the machine's available memory.
type Limit struct {
	Bytes int64 // the limit in bytes
	// Source is a phrase a report can print, naming where Bytes came from:
	// "the container's memory limit (cgroup v1 memory.limit_in_bytes of
	// /process_api/3ae8…)", "the machine's available memory (MemAvailable)".
	Source string
	Kind   LimitKind
	// Cgroup is the cgroup whose limit Bytes is, as /proc/self/cgroup names
	// paths ("/process_api/3ae8…"): the process's own cgroup or one of its
	// ancestors. Empty when the limit is the machine's.
	Cgroup string
	// File is the file Bytes was read from
	// ("/sys/fs/cgroup/memory/process_api/3ae8…/memory.limit_in_bytes",
	// "/proc/meminfo").
	File string
	// Usage is what the Cgroup holds now (memory.usage_in_bytes on cgroup v1,
	// memory.current on v2), so Bytes - Usage is what may still be charged
	// before its OOM killer acts. -1 for the machine's memory, or when the
	// file cannot be read.
	Usage int64
	// MachineTotal and MachineAvailable are MemTotal and MemAvailable (or
	// MemFree + Cached) of /proc/meminfo; 0 when unknown. A container's
	// limit can exceed what the machine has free.
	MachineTotal, MachineAvailable int64
}

// FromCgroup reports whether the limit is a cgroup's (a container's), not
// the machine's memory.
func (l Limit) FromCgroup() bool { return l.Kind == LimitCgroupV1 || l.Kind == LimitCgroupV2 }

// String is the limit as a report prints it: "the container's memory limit
// (cgroup v1 memory.limit_in_bytes of /a/b) of 200.00 MiB, 4.71 MiB in use".
func (l Limit) String() string {
	s := l.Source + " of " + FormatBytes(l.Bytes)
	if l.Usage >= 0 {
		s += ", " + FormatBytes(l.Usage) + " in use"
	}
	return s
}

// cgroupV1NoLimit is what a cgroup v1 memory.limit_in_bytes reads when no
// limit is set: PAGE_COUNTER_MAX pages, math.MaxInt64 rounded down to 4 KiB.
const cgroupV1NoLimit = 9223372036854771712

// readProcessLimit is ProcessLimit over the file system fsys, rooted where
// "/" is (paths "proc/self/cgroup", "sys/fs/cgroup/..."), so that fixtures
// in testdata can stand in for a machine.
func readProcessLimit(fsys fs.FS) (Limit, error) {
	lim := Limit{Usage: -1}
	mi, miErr := readMeminfo(fsys)
	if miErr == nil {
		lim.MachineTotal = mi["MemTotal"]
		if a, ok := mi["MemAvailable"]; ok {
			lim.MachineAvailable = a
		} else {
			lim.MachineAvailable = mi["MemFree"] + mi["Cached"]
		}
	}
	cg, found, err := findMemoryCgroup(fsys)
	if err != nil {
		return Limit{}, err
	}
	if found {
		ok, err := cg.limit(fsys, lim.MachineTotal, &lim)
		if err != nil {
			return Limit{}, err
		}
		if ok {
			return lim, nil
		}
	}
	if miErr != nil {
		return Limit{}, fmt.Errorf("%w: no cgroup limits its memory, and %w", ErrNoLimit, miErr)
	}
	lim.File = "/proc/meminfo"
	if a, ok := mi["MemAvailable"]; ok {
		lim.Bytes, lim.Kind = a, LimitMemAvailable
		lim.Source = "the machine's available memory (MemAvailable)"
		return lim, nil
	}
	free, okf := mi["MemFree"]
	cached, okc := mi["Cached"]
	if !okf || !okc {
		return Limit{}, fmt.Errorf("%w: no cgroup limits its memory, and /proc/meminfo has neither MemAvailable nor MemFree and Cached", ErrNoLimit)
	}
	lim.Bytes, lim.Kind = free+cached, LimitMemFreeCached
	lim.Source = "the machine's available memory (MemFree + Cached: this kernel reports no MemAvailable)"
	return lim, nil
}

// readMeminfo reads /proc/meminfo under fsys.
func readMeminfo(fsys fs.FS) (map[string]int64, error) {
	b, err := fs.ReadFile(fsys, "proc/meminfo")
	if err != nil {
		return nil, fmt.Errorf("mem: reading /proc/meminfo: %w", err)
	}
	mi, err := parseMeminfo(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("mem: /proc/meminfo: %w", err)
	}
	return mi, nil
}

// memoryCgroup is the cgroup of the process in the hierarchy that holds the
// memory controller, and where that hierarchy is mounted.
type memoryCgroup struct {
	version    int    // 1 or 2
	mountRoot  string // the part of the hierarchy the mount shows: "/", "/docker/abc"
	mountPoint string // "/sys/fs/cgroup/memory"
	rel        string // the cgroup under mountRoot: "/process_api/3ae8…", "" for mountRoot itself
}

// name is the cgroup rel (c.rel or one of its ancestors) as /proc/self/cgroup
// names paths: "/process_api/3ae8…".
func (c memoryCgroup) name(rel string) string {
	switch {
	case c.mountRoot == "/" && rel == "":
		return "/"
	case c.mountRoot == "/":
		return rel
	}
	return c.mountRoot + rel
}

// dir is the directory of cgroup rel as an fs.FS path:
// "sys/fs/cgroup/memory/process_api/3ae8…".
func (c memoryCgroup) dir(rel string) string {
	d := strings.TrimPrefix(strings.TrimSuffix(c.mountPoint, "/")+rel, "/")
	if d == "" {
		return "."
	}
	return d
}

// limit sets lim to the smallest limit of c's cgroup and its ancestors (up to
// the root of the mount), and reports whether there is one. Limits at or above
// total (the machine's memory, when known) and v1's no-limit value count as
// none. A missing limit file (a v2 root, a hierarchy without the controller
// enabled) is no limit; an unreadable or malformed one is an error.
func (c memoryCgroup) limit(fsys fs.FS, total int64, lim *Limit) (bool, error) {
	file, usageFile := "memory.limit_in_bytes", "memory.usage_in_bytes"
	if c.version == 2 {
		file, usageFile = "memory.max", "memory.current"
	}
	found := false
	for rel := c.rel; ; rel = rel[:strings.LastIndexByte(rel, '/')] {
		name := c.dir(rel) + "/" + file
		b, err := fs.ReadFile(fsys, name)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return false, fmt.Errorf("mem: reading the cgroup memory limit /%s: %w", name, err)
		default:
			n, unlimited, err := parseCgroupLimit(string(b))
			if err != nil {
				return false, fmt.Errorf("mem: cgroup memory limit /%s: %w", name, err)
			}
			if !unlimited && n < cgroupV1NoLimit && (total <= 0 || n < total) && (!found || n < lim.Bytes) {
				found = true
				lim.Bytes, lim.Cgroup, lim.File = n, c.name(rel), "/"+name
				lim.Usage = readCgroupNumber(fsys, c.dir(rel)+"/"+usageFile)
			}
		}
		if rel == "" {
			break
		}
	}
	if found {
		lim.Kind = LimitCgroupV1
		if c.version == 2 {
			lim.Kind = LimitCgroupV2
		}
		lim.Source = fmt.Sprintf("the container's memory limit (cgroup v%d %s of %s)", c.version, file, lim.Cgroup)
	}
	return found, nil
}

// readCgroupNumber reads a file holding one number, or returns -1.
func readCgroupNumber(fsys fs.FS, file string) int64 {
	b, err := fs.ReadFile(fsys, file)
	if err != nil {
		return -1
	}
	n, unlimited, err := parseCgroupLimit(string(b))
	if err != nil || unlimited {
		return -1
	}
	return n
}

// parseCgroupLimit parses a cgroup memory file's value: a byte count, or
// "max" (v2's no limit), with optional surrounding space.
func parseCgroupLimit(s string) (n int64, unlimited bool, err error) {
	s = strings.TrimSpace(s)
	if s == "max" {
		return 0, true, nil
	}
	n, err = strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, false, fmt.Errorf("got %q, want a byte count or \"max\"", s)
	}
	return n, false, nil
}

// findMemoryCgroup finds the process's memory cgroup from /proc/self/cgroup
// and /proc/self/mountinfo under fsys. A v1 hierarchy with the memory
// controller wins over the v2 one (a controller sits in one hierarchy at a
// time, so on a hybrid system with memory on v1 the v2 hierarchy has none).
// found is false when the process is in no memory cgroup that is mounted
// where it can see it.
func findMemoryCgroup(fsys fs.FS) (cg memoryCgroup, found bool, err error) {
	b, err := fs.ReadFile(fsys, "proc/self/cgroup")
	if errors.Is(err, fs.ErrNotExist) {
		return memoryCgroup{}, false, nil
	}
	if err != nil {
		return memoryCgroup{}, false, fmt.Errorf("mem: reading /proc/self/cgroup: %w", err)
	}
	groups, err := parseCgroup(bytes.NewReader(b))
	if err != nil {
		return memoryCgroup{}, false, fmt.Errorf("mem: /proc/self/cgroup: %w", err)
	}
	v1, v2 := "", ""
	for _, g := range groups {
		switch {
		case g.ID == 0:
			v2 = g.Path
		case hasController(g.Controllers, "memory"):
			v1 = g.Path
		}
	}
	if v1 == "" && v2 == "" {
		return memoryCgroup{}, false, nil
	}
	b, err = fs.ReadFile(fsys, "proc/self/mountinfo")
	if err != nil {
		return memoryCgroup{}, false, fmt.Errorf("mem: reading /proc/self/mountinfo: %w", err)
	}
	mounts, err := parseMountinfo(bytes.NewReader(b))
	if err != nil {
		return memoryCgroup{}, false, fmt.Errorf("mem: /proc/self/mountinfo: %w", err)
	}
	for _, m := range mounts {
		cg := memoryCgroup{mountRoot: m.Root, mountPoint: m.MountPoint}
		p := ""
		switch {
		case v1 != "" && m.FSType == "cgroup" && hasController(strings.Split(m.SuperOptions, ","), "memory"):
			cg.version, p = 1, v1
		case v1 == "" && m.FSType == "cgroup2":
			cg.version, p = 2, v2
		default:
			continue
		}
		if !hasPathPrefix(p, m.Root) {
			continue // the mount shows another part of the hierarchy
		}
		if m.Root != "/" {
			cg.rel = p[len(m.Root):]
		} else if p != "/" {
			cg.rel = p
		}
		// A cgroup outside the process's cgroup namespace reads "/../x":
		// this mount cannot reach it. Nor can an fs.FS reach odd paths.
		if (cg.rel != "" && !fs.ValidPath(cg.rel[1:])) || !fs.ValidPath(cg.dir(cg.rel)) {
			continue
		}
		return cg, true, nil
	}
	return memoryCgroup{}, false, nil
}

// hasPathPrefix reports whether path p is prefix or lies under it.
func hasPathPrefix(p, prefix string) bool {
	if prefix == "/" {
		return strings.HasPrefix(p, "/")
	}
	return strings.HasPrefix(p, prefix) && (len(p) == len(prefix) || p[len(prefix)] == '/')
}

func hasController(list []string, name string) bool {
	for _, c := range list {
		if c == name {
			return true
		}
	}
	return false
}

// cgroupEntry is one line of /proc/self/cgroup: "4:memory:/process_api/x"
// (a v1 hierarchy), "0::/user.slice" (the v2 hierarchy).
type cgroupEntry struct {
	ID          int      // hierarchy id; 0 is cgroup v2
	Controllers []string // "memory", "cpu", "name=systemd"; none on v2
	Path        string   // the cgroup, from the hierarchy's root (or the cgroup namespace's)
}

// maxLine bounds one line of a /proc file the parsers read.
const maxLine = 1 << 20

func newLineScanner(r io.Reader) *bufio.Scanner {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxLine)
	return sc
}

// parseCgroup parses /proc/self/cgroup (man 7 cgroups): lines of
// hierarchy-ID:controller-list:cgroup-path. Empty lines are skipped.
func parseCgroup(r io.Reader) ([]cgroupEntry, error) {
	var out []cgroupEntry
	sc := newLineScanner(r)
	for line := 1; sc.Scan(); line++ {
		s := sc.Text()
		if s == "" {
			continue
		}
		id, rest, ok1 := strings.Cut(s, ":")
		ctl, p, ok2 := strings.Cut(rest, ":")
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("line %d: got %q, want id:controllers:path", line, s)
		}
		n, err := strconv.Atoi(id)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("line %d: hierarchy id %q is not a number", line, id)
		}
		if !strings.HasPrefix(p, "/") {
			return nil, fmt.Errorf("line %d: cgroup path %q does not start with /", line, p)
		}
		var ctls []string
		if ctl != "" {
			ctls = strings.Split(ctl, ",")
		}
		out = append(out, cgroupEntry{ID: n, Controllers: ctls, Path: p})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// mountEntry is the part of a /proc/self/mountinfo line the limit needs.
type mountEntry struct {
	Root         string // the directory of the file system the mount shows: "/"
	MountPoint   string // where it is mounted: "/sys/fs/cgroup/memory"
	FSType       string // "cgroup", "cgroup2", "ext4"
	SuperOptions string // "rw,memory"
}

// parseMountinfo parses /proc/self/mountinfo (man 5 proc_pid_mountinfo):
//
//	36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
//	(1)(2)(3)   (4)   (5)      (6)      (7)   (8) (9)   (10)         (11)
//
// Root (4) and mount point (5) are unescaped (the kernel writes space, tab,
// newline and backslash as \ooo octal). Empty lines are skipped.
func parseMountinfo(r io.Reader) ([]mountEntry, error) {
	var out []mountEntry
	sc := newLineScanner(r)
	for line := 1; sc.Scan(); line++ {
		s := sc.Text()
		if s == "" {
			continue
		}
		f := strings.Split(s, " ")
		sep := -1
		for i := 6; i < len(f); i++ {
			if f[i] == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || len(f) < sep+3 {
			return nil, fmt.Errorf("line %d: got %d fields and no \" - \" before the last 2: %q", line, len(f), s)
		}
		root, err1 := unescapeMountPath(f[3])
		mp, err2 := unescapeMountPath(f[4])
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		e := mountEntry{Root: root, MountPoint: mp, FSType: f[sep+1]}
		// Only a cgroup mount's root is a path the limit joins onto; other
		// file systems show what they like there (nsfs: "net:[4026532176]"
		// for every `ip netns add`).
		if !strings.HasPrefix(mp, "/") || (isCgroupFS(e.FSType) && !strings.HasPrefix(root, "/")) {
			return nil, fmt.Errorf("line %d: %s mount at %q of root %q: the mount point and a cgroup's root must start with /", line, e.FSType, mp, root)
		}
		if len(f) > sep+3 {
			e.SuperOptions = strings.Join(f[sep+3:], " ")
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// isCgroupFS reports whether a mountinfo file system type is a cgroup
// hierarchy, v1 or v2.
func isCgroupFS(t string) bool { return t == "cgroup" || t == "cgroup2" }

// unescapeMountPath undoes the kernel's show_path escapes: \ooo octal.
func unescapeMountPath(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			continue
		}
		if i+4 > len(s) {
			return "", fmt.Errorf("path %q: escape at byte %d is cut short", s, i)
		}
		v, err := strconv.ParseUint(s[i+1:i+4], 8, 8)
		if err != nil {
			return "", fmt.Errorf("path %q: bad escape %q at byte %d", s, s[i:i+4], i)
		}
		b.WriteByte(byte(v))
		i += 3
	}
	return b.String(), nil
}

// parseMeminfo parses /proc/meminfo (man 5 proc_meminfo): lines of
// "Name: value [kB]", returned in bytes by name. Empty lines are skipped.
func parseMeminfo(r io.Reader) (map[string]int64, error) {
	out := make(map[string]int64)
	sc := newLineScanner(r)
	for line := 1; sc.Scan(); line++ {
		s := sc.Text()
		if strings.TrimSpace(s) == "" {
			continue
		}
		name, rest, ok := strings.Cut(s, ":")
		f := strings.Fields(rest)
		if !ok || name == "" || len(f) == 0 || len(f) > 2 || (len(f) == 2 && f[1] != "kB") {
			return nil, fmt.Errorf("line %d: got %q, want \"Name: value [kB]\"", line, s)
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("line %d: %s: %q is not a count", line, name, f[0])
		}
		if len(f) == 2 {
			if n > math.MaxInt64/1024 {
				return nil, fmt.Errorf("line %d: %s: %d kB overflows int64 bytes", line, name, n)
			}
			n *= 1024
		}
		out[name] = n
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}
