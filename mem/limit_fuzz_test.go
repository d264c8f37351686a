package mem

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
)

// fuzzSeeds adds the named file of every fixture machine to f's corpus.
func fuzzSeeds(f *testing.F, name string) {
	dirs, _ := filepath.Glob(filepath.Join("testdata", "cgroup", "*"))
	for _, d := range dirs {
		if b, err := os.ReadFile(filepath.Join(d, name)); err == nil {
			f.Add(string(b))
		}
	}
}

// fuzzFS is a machine with a v1 memory hierarchy and a v2 one, each with a
// limit on /a, whose file named name is replaced by data.
func fuzzFS(name, data string) fstest.MapFS {
	m := fstest.MapFS{
		"proc/self/cgroup":    {Data: []byte("4:memory:/a/b\n0::/a/b\n")},
		"proc/self/mountinfo": {Data: []byte(v1Mount + "36 31 0:33 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n")},
		"proc/meminfo":        {Data: []byte(meminfo16)},
		"sys/fs/cgroup/memory/a/memory.limit_in_bytes":   {Data: []byte("1048576\n")},
		"sys/fs/cgroup/memory/a/b/memory.limit_in_bytes": {Data: []byte(v1NoLimit)},
		"sys/fs/cgroup/unified/a/memory.max":             {Data: []byte("2097152\n")},
	}
	m[name] = &fstest.MapFile{Data: []byte(data)}
	return m
}

// checkLimit fails t unless lim is a result readProcessLimit may give: a
// cgroup's limit no larger than the machine, or the machine's memory.
func checkLimit(t *testing.T, lim Limit, err error) {
	t.Helper()
	if err != nil {
		return
	}
	switch {
	case lim.Bytes < 0 || lim.Source == "" || lim.File == "":
		t.Fatalf("got %#v: a negative limit or no source", lim)
	case lim.FromCgroup() && (!strings.HasPrefix(lim.Cgroup, "/") || (lim.MachineTotal > 0 && lim.Bytes >= lim.MachineTotal)):
		t.Fatalf("got %#v: a cgroup limit with no cgroup or above the machine", lim)
	case !lim.FromCgroup() && (lim.Cgroup != "" || lim.Usage != -1):
		t.Fatalf("got %#v: the machine's memory with a cgroup", lim)
	}
}

func FuzzParseCgroup(f *testing.F) {
	fuzzSeeds(f, "proc/self/cgroup")
	f.Add("4:memory:/../x\n0::/a/b/../c\n")
	f.Add("4:memory:/a//b\n")
	f.Fuzz(func(t *testing.T, data string) {
		groups, err := parseCgroup(strings.NewReader(data))
		if err == nil {
			for _, g := range groups {
				if g.ID < 0 || !strings.HasPrefix(g.Path, "/") {
					t.Fatalf("got %#v from %q", g, data)
				}
			}
		}
		lim, err := readProcessLimit(fuzzFS("proc/self/cgroup", data))
		checkLimit(t, lim, err)
	})
}

func FuzzParseMountinfo(f *testing.F) {
	fuzzSeeds(f, "proc/self/mountinfo")
	f.Add(`35 31 0:32 /a /sys/fs/cgroup/mem\040ory rw - cgroup cgroup rw,memory` + "\n")
	f.Add("35 31 0:32 /a/b / rw - cgroup2 cgroup2 rw\n")
	f.Fuzz(func(t *testing.T, data string) {
		mounts, err := parseMountinfo(strings.NewReader(data))
		if err == nil {
			for _, m := range mounts {
				if (isCgroupFS(m.FSType) && !strings.HasPrefix(m.Root, "/")) || !strings.HasPrefix(m.MountPoint, "/") || strings.Contains(m.FSType, " ") {
					t.Fatalf("got %#v from %q", m, data)
				}
			}
		}
		lim, err := readProcessLimit(fuzzFS("proc/self/mountinfo", data))
		checkLimit(t, lim, err)
	})
}

func FuzzParseMeminfo(f *testing.F) {
	fuzzSeeds(f, "proc/meminfo")
	f.Fuzz(func(t *testing.T, data string) {
		mi, err := parseMeminfo(strings.NewReader(data))
		if err == nil {
			for k, v := range mi {
				if v < 0 || k == "" {
					t.Fatalf("got %s = %d from %q", k, v, data)
				}
			}
		}
		lim, err := readProcessLimit(fuzzFS("proc/meminfo", data))
		checkLimit(t, lim, err)
	})
}
