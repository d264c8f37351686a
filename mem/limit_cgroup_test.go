//go:build linux

package mem_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/headroom-ml/headroom/internal/testutil"
	"github.com/headroom-ml/headroom/mem"
)

// limitChildEnv makes this test binary, run again by the tests below, print
// ProcessLimit as the child (TestProcessLimitChild).
const limitChildEnv = "HEADROOM_MEM_LIMIT_CHILD"

// TestProcessLimitChild is the child's side; run plainly it does nothing.
func TestProcessLimitChild(t *testing.T) {
	if os.Getenv(limitChildEnv) == "" {
		return
	}
	lim, err := mem.ProcessLimit()
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(lim)
	if err != nil {
		t.Fatal(err)
	}
	os.Stdout.Write(append(append([]byte("LIMIT "), b...), '\n'))
}

// childLimit runs TestProcessLimitChild in cg (nil: where this process is)
// and returns the Limit it printed.
func childLimit(t *testing.T, cg *testutil.MemoryCgroup) mem.Limit {
	t.Helper()
	args := []string{"-test.run=^TestProcessLimitChild$", "-test.count=1"}
	cmd := exec.Command(os.Args[0], args...)
	if cg != nil {
		cmd = cg.Command(os.Args[0], args...)
	}
	cmd.Env = append(os.Environ(), limitChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if s, ok := strings.CutPrefix(l, "LIMIT "); ok {
			var lim mem.Limit
			if err := json.Unmarshal([]byte(s), &lim); err != nil {
				t.Fatalf("child printed %q: %v", s, err)
			}
			return lim
		}
	}
	t.Fatalf("child printed no limit:\n%s", out)
	return mem.Limit{}
}

// TestProcessLimitInCgroup runs a child in a real 200 MiB memory cgroup: it
// must report that limit, as the container's, naming the cgroup.
func TestProcessLimitInCgroup(t *testing.T) {
	const limit = 200 << 20
	cg := testutil.NewMemoryCgroup(t, limit)
	want := int64(limit)
	if own, limited, err := testutil.CgroupMemoryLimit(); err != nil {
		t.Fatal(err)
	} else if limited && own < want {
		want = own // this process lives under less than the test cgroup's limit
	}
	got := childLimit(t, cg)
	if got.Bytes != want || !got.FromCgroup() {
		t.Fatalf("got %d bytes from %v (%s), want %d from a cgroup", got.Bytes, got.Kind, got.Source, want)
	}
	wantKind := mem.LimitCgroupV1
	if cg.Version == 2 {
		wantKind = mem.LimitCgroupV2
	}
	if got.Kind != wantKind {
		t.Errorf("Kind: got %v, want %v", got.Kind, wantKind)
	}
	if want == limit {
		if got.Cgroup != cg.Path || !strings.HasPrefix(got.Source, "the container's memory limit (cgroup v") || !strings.HasSuffix(got.Source, " of "+cg.Path+")") {
			t.Errorf("got cgroup %q, source %q; want the container's limit of %s", got.Cgroup, got.Source, cg.Path)
		}
		if !strings.HasPrefix(got.File, cg.Dir+"/") {
			t.Errorf("File: got %q, want one in %s", got.File, cg.Dir)
		}
	}
	if got.Usage <= 0 || got.Usage > want {
		t.Errorf("Usage: got %d, want the child's few MiB, under %d", got.Usage, want)
	}
	t.Logf("in the cgroup: %v", got)
}

// TestProcessLimitHere: outside a test cgroup, a child and this process
// report what the harness reads the kernel's limit to be: a cgroup's, or the
// machine's available memory where none limits it.
func TestProcessLimitHere(t *testing.T) {
	own, limited, err := testutil.CgroupMemoryLimit()
	if err != nil {
		t.Fatal(err)
	}
	here, err := mem.ProcessLimit()
	if err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string]mem.Limit{"this process": here, "a child": childLimit(t, nil)} {
		switch {
		case limited && (!got.FromCgroup() || got.Bytes != own):
			t.Errorf("%s: got %v, want the cgroup limit of %d", name, got, own)
		case !limited && (got.FromCgroup() || got.Cgroup != "" || got.Bytes <= 0 || got.Bytes > got.MachineTotal):
			t.Errorf("%s: got %v, want the machine's available memory", name, got)
		}
	}
	t.Logf("here: %v (harness: limit %d, %v)", here, own, limited)
}
