package mem

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/fstest"
)

// The machines of testdata/cgroup (meminfo figures are in kB there) and the
// files and phrases the tests expect.
const (
	hybridTotal, hybridAvail      = 24684084 << 10, 24256292 << 10 // this machine's
	total16, avail16              = 16314748 << 10, 12897364 << 10
	oldTotal, oldFree, oldCached  = 8061404 << 10, 3127536 << 10, 3362992 << 10
	hybridMachine, machine16, old = "hybrid", "16", "old"

	hybridID      = "5c1f0b7a9d2e4f6081a3b5c7d9e1f203"
	hybridLeaf    = "/process_api/" + hybridID
	hybridLeafDir = "/sys/fs/cgroup/memory" + hybridLeaf
	dockerCgroup  = "/docker/4f2b8c1e9a7d3065b1c2e8f4a6d90b37e5c1a2f3d4b5c6e7f8091a2b3c4d5e6f"
	v2SliceDir    = "/sys/fs/cgroup/user.slice/user-1000.slice"
	oldJobDir     = "/cgroup/memory/batch/job42"

	v1Limit, v2Limit, meminfo = "memory.limit_in_bytes", "memory.max", "/proc/meminfo"
	sysMemory, sysV2          = "sys/fs/cgroup/memory/", "sys/fs/cgroup/"
	v1NoLimit                 = "9223372036854771712\n"
	v1Mount                   = "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
	v2Mount                   = "34 24 0:28 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate\n"
	meminfo16                 = "MemTotal:       16314748 kB\nMemFree:         9472120 kB\nMemAvailable:   12897364 kB\nCached:          3409860 kB\n"

	v1Phrase         = "the container's memory limit (cgroup v1 memory.limit_in_bytes of "
	v2Phrase         = "the container's memory limit (cgroup v2 memory.max of "
	machineAvailable = "the machine's available memory (MemAvailable)"
	freeCachedPhrase = "the machine's available memory (MemFree + Cached: this kernel reports no MemAvailable)"
	usageUnknown     = -1
)

func machine(which string) (total, avail int64) {
	switch which {
	case hybridMachine:
		return hybridTotal, hybridAvail
	case old:
		return oldTotal, oldFree + oldCached
	}
	return total16, avail16
}

func TestReadProcessLimitFixtures(t *testing.T) {
	for _, tc := range []struct {
		dir     string
		machine string
		want    Limit // Machine* filled from machine
	}{
		{"v1-hybrid-unlimited", hybridMachine, Limit{Bytes: hybridAvail, Source: machineAvailable, Kind: LimitMemAvailable, File: meminfo, Usage: usageUnknown}},
		{"v1-hybrid-leaf", hybridMachine, Limit{Bytes: 200 << 20, Source: v1Phrase + hybridLeaf + ")", Kind: LimitCgroupV1,
			Cgroup: hybridLeaf, File: hybridLeafDir + "/" + v1Limit, Usage: 4943872}},
		{"v1-parent", hybridMachine, Limit{Bytes: 512 << 20, Source: v1Phrase + "/process_api)", Kind: LimitCgroupV1,
			Cgroup: "/process_api", File: "/sys/fs/cgroup/memory/process_api/" + v1Limit, Usage: 893435904}},
		{"v1-docker", machine16, Limit{Bytes: 512 << 20, Source: v1Phrase + dockerCgroup + ")", Kind: LimitCgroupV1,
			Cgroup: dockerCgroup, File: "/sys/fs/cgroup/memory/" + v1Limit, Usage: 12582912}},
		{"v1-old-kernel", old, Limit{Bytes: oldFree + oldCached, Source: freeCachedPhrase, Kind: LimitMemFreeCached, File: meminfo, Usage: usageUnknown}},
		{"v1-old-kernel-job", old, Limit{Bytes: 1 << 30, Source: v1Phrase + "/batch/job42)", Kind: LimitCgroupV1,
			Cgroup: "/batch/job42", File: oldJobDir + "/" + v1Limit, Usage: 734003200}},
		{"v2-slice", machine16, Limit{Bytes: 4 << 30, Source: v2Phrase + "/user.slice/user-1000.slice)", Kind: LimitCgroupV2,
			Cgroup: "/user.slice/user-1000.slice", File: v2SliceDir + "/" + v2Limit, Usage: 1 << 30}},
		{"v2-container", machine16, Limit{Bytes: 256 << 20, Source: v2Phrase + "/)", Kind: LimitCgroupV2,
			Cgroup: "/", File: "/sys/fs/cgroup/" + v2Limit, Usage: 8007680}},
		{"v2-unlimited", machine16, Limit{Bytes: avail16, Source: machineAvailable, Kind: LimitMemAvailable, File: meminfo, Usage: usageUnknown}},
		{"v2-over-machine", machine16, Limit{Bytes: avail16, Source: machineAvailable, Kind: LimitMemAvailable, File: meminfo, Usage: usageUnknown}},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			got, err := readProcessLimit(os.DirFS(filepath.Join("testdata", "cgroup", tc.dir)))
			if err != nil {
				t.Fatalf("got error %v, want none", err)
			}
			want := tc.want
			want.MachineTotal, want.MachineAvailable = machine(tc.machine)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got  %#v\nwant %#v", got, want)
			}
			if got.FromCgroup() != (want.Kind == LimitCgroupV1 || want.Kind == LimitCgroupV2) {
				t.Errorf("FromCgroup() = %v for kind %v", got.FromCgroup(), got.Kind)
			}
		})
	}
}

// TestReadProcessLimitCases covers what the fixtures do not, on small
// in-memory file systems: escapes, namespaces, missing and broken files.
func TestReadProcessLimitCases(t *testing.T) {
	files := func(kv ...string) fstest.MapFS {
		m := fstest.MapFS{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = &fstest.MapFile{Data: []byte(kv[i+1])}
		}
		return m
	}
	const cg, mi = "proc/self/cgroup", "proc/self/mountinfo"
	for _, tc := range []struct {
		name      string
		fsys      fstest.MapFS
		want      Limit  // compared when wantErr is ""
		wantErr   string // a part of the error
		wantNoLim bool   // the error wraps ErrNoLimit
	}{
		{name: "escaped mount point", fsys: files(cg, "4:memory:/a b\n", mi, `35 31 0:32 / /sys/fs/cgroup/mem\040ory rw - cgroup cgroup rw,memory`+"\n",
			"sys/fs/cgroup/mem ory/a b/"+v1Limit, "1048576\n", "proc/meminfo", meminfo16),
			want: Limit{Bytes: 1 << 20, Source: v1Phrase + "/a b)", Kind: LimitCgroupV1, Cgroup: "/a b", File: "/sys/fs/cgroup/mem ory/a b/" + v1Limit,
				Usage: usageUnknown, MachineTotal: total16, MachineAvailable: avail16}},
		{name: "outside the cgroup namespace", fsys: files(cg, "0::/../../init.scope\n", mi, v2Mount, sysV2+v2Limit, "1048576\n", "proc/meminfo", meminfo16),
			want: Limit{Bytes: avail16, Source: machineAvailable, Kind: LimitMemAvailable, File: meminfo, Usage: usageUnknown, MachineTotal: total16, MachineAvailable: avail16}},
		{name: "v1 memory not mounted", fsys: files(cg, "4:memory:/a\n0::/\n", mi, v2Mount, sysV2+v2Limit, "1048576\n", "proc/meminfo", meminfo16),
			want: Limit{Bytes: avail16, Source: machineAvailable, Kind: LimitMemAvailable, File: meminfo, Usage: usageUnknown, MachineTotal: total16, MachineAvailable: avail16}},
		{name: "mount shows another part", fsys: files(cg, "4:memory:/docker/x\n", mi, "35 31 0:32 /other /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n",
			sysMemory+v1Limit, "1048576\n", "proc/meminfo", meminfo16),
			want: Limit{Bytes: avail16, Source: machineAvailable, Kind: LimitMemAvailable, File: meminfo, Usage: usageUnknown, MachineTotal: total16, MachineAvailable: avail16}},
		{name: "root prefix is not a path prefix", fsys: files(cg, "4:memory:/dockerx\n", mi, "35 31 0:32 /docker /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n",
			sysMemory+v1Limit, "1048576\n", "proc/meminfo", meminfo16),
			want: Limit{Bytes: avail16, Source: machineAvailable, Kind: LimitMemAvailable, File: meminfo, Usage: usageUnknown, MachineTotal: total16, MachineAvailable: avail16}},
		{name: "mount root above the cgroup", fsys: files(cg, "7:memory:/kubepods/burstable/pod1/c1\n",
			mi, "35 31 0:32 /kubepods /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n", sysMemory+v1Limit, v1NoLimit,
			sysMemory+"burstable/pod1/"+v1Limit, "536870912\n", sysMemory+"burstable/pod1/c1/"+v1Limit, "1073741824\n", "proc/meminfo", meminfo16),
			want: Limit{Bytes: 512 << 20, Source: v1Phrase + "/kubepods/burstable/pod1)", Kind: LimitCgroupV1, Cgroup: "/kubepods/burstable/pod1",
				File: "/" + sysMemory + "burstable/pod1/" + v1Limit, Usage: usageUnknown, MachineTotal: total16, MachineAvailable: avail16}},
		{name: "a limit of zero", fsys: files(cg, "0::/\n", mi, v2Mount, sysV2+v2Limit, "0\n", sysV2+"memory.current", "0\n", "proc/meminfo", meminfo16),
			want: Limit{Bytes: 0, Source: v2Phrase + "/)", Kind: LimitCgroupV2, Cgroup: "/", File: "/" + sysV2 + v2Limit, Usage: 0, MachineTotal: total16, MachineAvailable: avail16}},
		{name: "no meminfo, a v1 limit", fsys: files(cg, "4:memory:/a\n", mi, v1Mount, sysMemory+"a/"+v1Limit, "1073741824\n", sysMemory+v1Limit, v1NoLimit),
			want: Limit{Bytes: 1 << 30, Source: v1Phrase + "/a)", Kind: LimitCgroupV1, Cgroup: "/a", File: "/" + sysMemory + "a/" + v1Limit, Usage: usageUnknown}},
		{name: "no meminfo, no limit", fsys: files(cg, "4:memory:/a\n", mi, v1Mount, sysMemory+"a/"+v1Limit, v1NoLimit),
			wantErr: "/proc/meminfo", wantNoLim: true},
		{name: "nothing", fsys: files(), wantErr: "/proc/meminfo", wantNoLim: true},
		{name: "meminfo without free memory", fsys: files("proc/meminfo", "MemTotal: 1024 kB\n"), wantErr: "neither MemAvailable", wantNoLim: true},
		{name: "malformed memory.max", fsys: files(cg, "0::/\n", mi, v2Mount, sysV2+v2Limit, "lots\n", "proc/meminfo", meminfo16),
			wantErr: `/sys/fs/cgroup/memory.max: got "lots"`},
		{name: "malformed cgroup file", fsys: files(cg, "4:memory\n", "proc/meminfo", meminfo16), wantErr: "/proc/self/cgroup: line 1"},
		{name: "malformed mountinfo", fsys: files(cg, "0::/\n", mi, "35 31 0:32 / /sys/fs/cgroup\n", "proc/meminfo", meminfo16),
			wantErr: "/proc/self/mountinfo: line 1"},
		{name: "malformed meminfo", fsys: files("proc/meminfo", "MemTotal: many kB\n"), wantErr: "/proc/meminfo: line 1", wantNoLim: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readProcessLimit(tc.fsys)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got error %v, want one containing %q", err, tc.wantErr)
				}
				if errors.Is(err, ErrNoLimit) != tc.wantNoLim {
					t.Errorf("errors.Is(%v, ErrNoLimit) = %v, want %v", err, !tc.wantNoLim, tc.wantNoLim)
				}
				return
			}
			if err != nil {
				t.Fatalf("got error %v, want none", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %#v\nwant %#v", got, tc.want)
			}
		})
	}
}

func TestLimitString(t *testing.T) {
	for _, tc := range []struct {
		l    Limit
		want string
	}{
		{Limit{Bytes: 200 << 20, Source: v1Phrase + "/a)", Kind: LimitCgroupV1, Usage: 3 << 19},
			"the container's memory limit (cgroup v1 memory.limit_in_bytes of /a) of 200.00 MiB, 1.50 MiB in use"},
		{Limit{Bytes: 3 << 30, Source: machineAvailable, Kind: LimitMemAvailable, Usage: -1},
			"the machine's available memory (MemAvailable) of 3.00 GiB"},
	} {
		if got := tc.l.String(); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
	if got, want := LimitMemFreeCached.String(), "MemFree + Cached"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got, want := LimitKind(99).String(), "LimitKind(99)"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestParseCgroup(t *testing.T) {
	got, err := parseCgroup(strings.NewReader("12:pids:/docker/x\n10:cpu,cpuacct:/docker/x\n1:name=systemd:/\n0::/a:b\n\n"))
	if err != nil {
		t.Fatalf("got error %v, want none", err)
	}
	want := []cgroupEntry{
		{ID: 12, Controllers: []string{"pids"}, Path: "/docker/x"},
		{ID: 10, Controllers: []string{"cpu", "cpuacct"}, Path: "/docker/x"},
		{ID: 1, Controllers: []string{"name=systemd"}, Path: "/"},
		{ID: 0, Path: "/a:b"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %#v, want %#v", got, want)
	}
	for _, bad := range []string{"4:memory\n", "x:memory:/a\n", "-1:memory:/a\n", "4:memory:a\n", "0::\n"} {
		t.Run(bad, func(t *testing.T) {
			if _, err := parseCgroup(strings.NewReader(bad)); err == nil || !strings.Contains(err.Error(), "line 1") {
				t.Errorf("got error %v, want one naming line 1", err)
			}
		})
	}
}

func TestParseMountinfo(t *testing.T) {
	got, err := parseMountinfo(strings.NewReader(
		"34 24 0:28 / /sys/fs/cgroup rw,nosuid shared:9 master:2 - cgroup2 cgroup2 rw,nsdelegate\n" +
			`35 31 0:32 /a\134b /mnt/x\040y\011z rw - cgroup cgroup rw,memory` + "\n" +
			"36 31 0:33 / /mnt/z rw - tmpfs tmpfs\n" +
			// what `ip netns add` leaves: a root that is not a path (CI met it)
			"42 41 0:4 net:[4026532176] /run/netns/hrtA rw shared:2 - nsfs nsfs rw\n"))
	if err != nil {
		t.Fatalf("got error %v, want none", err)
	}
	want := []mountEntry{
		{Root: "/", MountPoint: "/sys/fs/cgroup", FSType: "cgroup2", SuperOptions: "rw,nsdelegate"},
		{Root: `/a\b`, MountPoint: "/mnt/x y\tz", FSType: "cgroup", SuperOptions: "rw,memory"},
		{Root: "/", MountPoint: "/mnt/z", FSType: "tmpfs"},
		{Root: "net:[4026532176]", MountPoint: "/run/netns/hrtA", FSType: "nsfs", SuperOptions: "rw"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %#v\nwant %#v", got, want)
	}
	for _, bad := range []string{
		"35 31 0:32 / /sys/fs/cgroup rw cgroup cgroup rw,memory",  // no separator
		"35 31 0:32 / /sys/fs/cgroup rw - cgroup",                 // no source
		"35 31 - / /sys/fs/cgroup rw cgroup cgroup rw",            // separator too early
		`35 31 0:32 / /mnt/x\04 rw - cgroup cgroup rw,memory`,     // escape cut short
		`35 31 0:32 / /mnt/x\999y rw - cgroup cgroup rw,memory`,   // not octal
		`35 31 0:32 rel /sys/fs/cgroup rw - cgroup cgroup rw,mem`, // relative root
		`35 31 0:32 / rel rw - tmpfs tmpfs rw`,                    // relative mount point
	} {
		t.Run(bad, func(t *testing.T) {
			if _, err := parseMountinfo(strings.NewReader(bad)); err == nil || !strings.Contains(err.Error(), "line 1") {
				t.Errorf("got error %v, want one naming line 1", err)
			}
		})
	}
}

func TestParseMeminfo(t *testing.T) {
	got, err := parseMeminfo(strings.NewReader("MemTotal:       16314748 kB\nHugePages_Total:       3\n\nDirectMap1G:  0 kB\n"))
	if err != nil {
		t.Fatalf("got error %v, want none", err)
	}
	want := map[string]int64{"MemTotal": 16314748 << 10, "HugePages_Total": 3, "DirectMap1G": 0}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for _, bad := range []string{"MemTotal 1 kB", "MemTotal: abc kB", "MemTotal: 1 MB", "MemTotal:", ": 1 kB",
		"MemTotal: -1 kB", "MemTotal: 9007199254740993 kB", "MemTotal: 1 kB extra"} {
		t.Run(bad, func(t *testing.T) {
			if _, err := parseMeminfo(strings.NewReader(bad)); err == nil || !strings.Contains(err.Error(), "line 1") {
				t.Errorf("got error %v, want one naming line 1", err)
			}
		})
	}
}

func TestParseCgroupLimit(t *testing.T) {
	for _, tc := range []struct {
		in        string
		n         int64
		unlimited bool
		ok        bool
	}{
		{"209715200\n", 209715200, false, true},
		{"max\n", 0, true, true},
		{"9223372036854771712", 9223372036854771712, false, true},
		{"", 0, false, false},
		{"-1", 0, false, false},
		{"12 kB", 0, false, false},
		{"9223372036854775808", 0, false, false},
	} {
		t.Run(tc.in, func(t *testing.T) {
			n, unlimited, err := parseCgroupLimit(tc.in)
			if (err == nil) != tc.ok || n != tc.n || unlimited != tc.unlimited {
				t.Errorf("got %d, %v, %v; want %d, %v, ok %v", n, unlimited, err, tc.n, tc.unlimited, tc.ok)
			}
		})
	}
}
