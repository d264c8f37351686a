//go:build linux

package mem_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/headroom-ml/headroom/internal/testutil"
	"github.com/headroom-ml/headroom/mem"
)

// watchChildEnv makes this test binary, run again, print two LimitWatch
// samples around 64 MiB of anonymous memory it touches (TestWatchChild).
const watchChildEnv = "HEADROOM_MEM_WATCH_CHILD"

// TestWatchChild is the child's side; run plainly it does nothing.
func TestWatchChild(t *testing.T) {
	if os.Getenv(watchChildEnv) == "" {
		return
	}
	lim, err := mem.ProcessLimit()
	if err != nil {
		t.Fatal(err)
	}
	w, err := lim.Watch()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	before, err := w.Read()
	if err != nil {
		t.Fatal(err)
	}
	held := make([]byte, 64<<20)
	for i := 0; i < len(held); i += 4096 {
		held[i] = 1
	}
	after, err := w.Read()
	if err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(10, func() { w.Read() })
	b, _ := json.Marshal([]any{before, after, allocs, held[4096]})
	os.Stdout.Write(append(append([]byte("WATCH "), b...), '\n'))
}

// TestLimitWatchInCgroup: in a real 200 MiB memory cgroup, a watch reads
// the limit, and 64 MiB the process touches show in its usage and in its
// own anonymous memory (not in what the others hold); a read allocates
// nothing.
func TestLimitWatchInCgroup(t *testing.T) {
	cg := testutil.NewMemoryCgroup(t, 200<<20)
	cmd := cg.Command(os.Args[0], "-test.run=^TestWatchChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), watchChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var got []json.RawMessage
	for _, l := range strings.Split(string(out), "\n") {
		if s, ok := strings.CutPrefix(l, "WATCH "); ok {
			if err := json.Unmarshal([]byte(s), &got); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(got) != 4 {
		t.Fatalf("child printed no samples:\n%s", out)
	}
	var before, after mem.LimitSample
	var allocs float64
	json.Unmarshal(got[0], &before)
	json.Unmarshal(got[1], &after)
	json.Unmarshal(got[2], &allocs)
	t.Logf("before %+v\nafter  %+v", before, after)
	if before.Limit != 200<<20 {
		t.Errorf("limit %d, want %d", before.Limit, 200<<20)
	}
	grew, own := after.Usage-before.Usage, after.Own-before.Own
	if grew < 60<<20 || own < 60<<20 {
		t.Errorf("after touching 64 MiB: usage grew %d B, own anonymous memory %d B; want both about 64 MiB", grew, own)
	}
	if d := after.Others() - before.Others(); d > 8<<20 || d < -8<<20 {
		t.Errorf("others moved by %d B when only this process grew", d)
	}
	if allocs != 0 {
		t.Errorf("a Read allocates %v times, want 0", allocs)
	}
}
