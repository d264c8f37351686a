package profile

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/pprof/profile"

	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/mem"
)

func writeParsePprof(t *testing.T, p *compile.Plan, name string) (*profile.Profile, []byte) {
	t.Helper()
	var buf bytes.Buffer
	if err := WritePprof(&buf, p, name); err != nil {
		t.Fatal(err)
	}
	prof, err := profile.Parse(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatalf("parsing the written profile: %v", err)
	}
	return prof, buf.Bytes()
}

func sampleIndex(t *testing.T, prof *profile.Profile, typ string) int {
	t.Helper()
	for i, st := range prof.SampleType {
		if st.Type == typ {
			return i
		}
	}
	t.Fatalf("profile has no sample type %q: %v", typ, prof.SampleType)
	return -1
}

func TestPprofTotalsEqualPlan(t *testing.T) {
	for _, c := range testPlans(t) {
		t.Run(c.name, func(t *testing.T) {
			p := c.plan
			prof, _ := writeParsePprof(t, p, c.name)
			if prof.DefaultSampleType != PeakBytes {
				t.Errorf("default sample type %q, want %q", prof.DefaultSampleType, PeakBytes)
			}
			peak, all, count := sampleIndex(t, prof, PeakBytes), sampleIndex(t, prof, BufferBytes), sampleIndex(t, prof, Buffers)
			var sumPeak, sumAll, sumCount int64
			var byCat [mem.NumCategories]int64
			for _, s := range prof.Sample {
				sumPeak += s.Value[peak]
				sumAll += s.Value[all]
				sumCount += s.Value[count]
				cat, err := mem.ParseCategory(label(s, "category"))
				if err != nil {
					t.Fatal(err)
				}
				byCat[cat] += s.Value[peak]
				owner := label(s, "owner")
				if owner == "" || label(s, "kind") == "" || label(s, "layer") != Layer(owner) {
					t.Errorf("sample labels %v: want owner, kind, and layer = Layer(owner)", s.Label)
				}
				if leaf := s.Location[0].Line[0].Function; leaf.Name != owner {
					t.Errorf("sample of %s: leaf function %q, want the owner", owner, leaf.Name)
				}
			}
			var bufBytes int64
			for _, b := range p.Buffers {
				bufBytes += b.Bytes
			}
			if sumPeak != p.Peak {
				t.Errorf("%s samples sum to %d B, want the plan's peak %d B", PeakBytes, sumPeak, p.Peak)
			}
			if byCat != p.Totals {
				t.Errorf("%s by category %v, want the plan's totals %v", PeakBytes, byCat, p.Totals)
			}
			if sumAll != bufBytes {
				t.Errorf("%s samples sum to %d B, want the buffers' %d B", BufferBytes, sumAll, bufBytes)
			}
			if sumCount != int64(len(p.Buffers)) {
				t.Errorf("%s samples sum to %d, want %d buffers", Buffers, sumCount, len(p.Buffers))
			}
		})
	}
}

func label(s *profile.Sample, key string) string {
	if v := s.Label[key]; len(v) == 1 {
		return v[0]
	}
	return ""
}

func TestPprofSitesAndFragmentation(t *testing.T) {
	p := gapPlan(t)
	prof, _ := writeParsePprof(t, p, "gap")
	peak := sampleIndex(t, prof, PeakBytes)
	got := map[string]int64{}
	for _, s := range prof.Sample {
		owner := label(s, "owner")
		got[owner] += s.Value[peak]
		fn := s.Location[0].Line[0].Function
		for _, b := range p.Buffers {
			if b.Owner != owner {
				continue
			}
			file, line := splitSite(b.Site)
			if fn.Filename != file || fn.StartLine != line || s.Location[0].Line[0].Line != line {
				t.Errorf("%s: function at %s:%d (line %d), want the site %s", owner, fn.Filename, fn.StartLine, s.Location[0].Line[0].Line, b.Site)
			}
			if label(s, "site") != b.Site {
				t.Errorf("%s: site label %q, want %q", owner, label(s, "site"), b.Site)
			}
		}
		if layer := Layer(owner); layer != owner && owner != ArenaFragmentation {
			if len(s.Location) != 2 || s.Location[1].Line[0].Function.Name != layer {
				t.Errorf("%s: stack %v, want the owner called from the layer %s", owner, s.Location, layer)
			}
		}
	}
	// At instruction 2, b1 (256 B) and b3 (640 B) are live, b2 is not; the
	// arena's other 512 B are fragmentation.
	want := map[string]int64{"dense/w": 1024, "dense/matmul": 256, "dense/add": 0, "grad/dense/matmul/matmul": 640, ArenaFragmentation: 512}
	for owner, w := range want {
		if got[owner] != w {
			t.Errorf("%s: %d B at the peak, want %d B", owner, got[owner], w)
		}
	}
}

func TestPprofRejectsInconsistentPlan(t *testing.T) {
	p := gapPlan(t)
	p.Totals[mem.Workspace] -= 64
	if err := WritePprof(&bytes.Buffer{}, p, "bad"); err == nil || !strings.Contains(err.Error(), "plan says") {
		t.Errorf("plan whose totals disagree with its buffers: error %v, want one naming the plan's figures", err)
	}
	p = gapPlan(t)
	p.Buffers[1].End = 9
	if err := WritePprof(&bytes.Buffer{}, p, "bad"); err == nil || !strings.Contains(err.Error(), "b1") {
		t.Errorf("buffer living past the program: error %v, want one naming b1", err)
	}
}

func TestLayer(t *testing.T) {
	for _, c := range []struct{ owner, want string }{
		{"conv2d/conv2d", "conv2d"},
		{"conv2d/kernel/m", "conv2d"},
		{"grad/conv2d_1/conv2d/conv2d_backprop_filter/workspace", "conv2d_1"},
		{"grad/grad/dense/matmul/matmul", "dense"},
		{"reduce_mean", "reduce_mean"},
		{"grad/", "grad/"},
		{"", ""},
	} {
		if got := Layer(c.owner); got != c.want {
			t.Errorf("Layer(%q) = %q, want %q", c.owner, got, c.want)
		}
	}
}

// goTool returns the go command.
func goTool(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	for _, p := range []string{filepath.Join(os.Getenv("GOROOT"), "bin", "go"), "/usr/local/go/bin/go"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Fatal("the go command is not on PATH nor in /usr/local/go/bin")
	return ""
}

// topRow is one line of `go tool pprof -top -unit=B`.
type topRow struct {
	flat, cum int64
	name      string
}

func pprofTop(t *testing.T, file string, args ...string) (rows []topRow, total int64, out string) {
	t.Helper()
	cmd := exec.Command(goTool(t), append(append([]string{"tool", "pprof", "-top", "-unit=B", "-nodecount=100000", "-nodefraction=0"}, args...), file)...)
	b, err := cmd.CombinedOutput()
	out = string(b)
	if err != nil {
		t.Fatalf("go tool pprof: %v\n%s", err, out)
	}
	body := false
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) > 0 && f[0] == "Showing":
			// "Showing nodes accounting for 1875136B, 100% of 1875136B total"
			for i, w := range f {
				if w == "total" && i > 0 {
					total = bytesField(t, f[i-1])
				}
			}
		case len(f) >= 5 && f[0] == "flat":
			body = true
		case body && len(f) >= 6:
			rows = append(rows, topRow{flat: bytesField(t, f[0]), cum: bytesField(t, f[3]), name: strings.Join(f[5:], " ")})
		}
	}
	return rows, total, out
}

func bytesField(t *testing.T, s string) int64 {
	n, err := strconv.ParseInt(strings.TrimSuffix(s, "B"), 10, 64)
	if err != nil {
		t.Fatalf("pprof printed %q where bytes were expected", s)
	}
	return n
}

// TestPprofTool runs `go tool pprof -top` on the reference CNN's profile:
// the total is the plan's peak, owners come largest first, and each layer
// appears (with -cum, by its bytes).
func TestPprofTool(t *testing.T) {
	p := cnnPlan(t)
	_, data := writeParsePprof(t, p, "cnn")
	file := filepath.Join(t.TempDir(), PprofFile)
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}

	rows, total, out := pprofTop(t, file, "-sample_index="+PeakBytes)
	if total != p.Peak {
		t.Errorf("pprof total %d B, want the plan's peak %d B\n%s", total, p.Peak, out)
	}
	var flat int64
	for i, r := range rows {
		flat += r.flat
		if i > 0 && r.flat > rows[i-1].flat {
			t.Errorf("row %q (%d B) after %q (%d B): want largest first", r.name, r.flat, rows[i-1].name, rows[i-1].flat)
		}
	}
	if flat != p.Peak {
		t.Errorf("pprof's flat column sums to %d B, want %d B\n%s", flat, p.Peak, out)
	}
	// A layer's cum is what its buffers hold at the peak.
	atPeak := map[string]int64{}
	for i := range p.Buffers {
		atPeak[Layer(p.Buffers[i].Owner)] += peakBytes(p, &p.Buffers[i])
	}
	cum := map[string]int64{}
	for _, r := range rows {
		cum[r.name] = r.cum
	}
	for _, l := range cnnLayers {
		if atPeak[l] == 0 {
			continue
		}
		if cum[l] != atPeak[l] {
			t.Errorf("layer %s: pprof cum %d B, want %d B\n%s", l, cum[l], atPeak[l], out)
		}
	}

	// Every buffer at its size: every layer and each of its owners appear.
	rows, total, out = pprofTop(t, file, "-sample_index="+BufferBytes)
	var all int64
	owners := map[string]int64{}
	for _, b := range p.Buffers {
		all += b.Bytes
		owners[b.Owner] += b.Bytes
	}
	if total != all {
		t.Errorf("%s total %d B, want %d B", BufferBytes, total, all)
	}
	listed := map[string]topRow{}
	for _, r := range rows {
		listed[r.name] = r
	}
	for _, l := range cnnLayers {
		if _, ok := listed[l]; !ok {
			t.Errorf("layer %s is missing from pprof -top -sample_index=%s:\n%s", l, BufferBytes, out)
		}
	}
	for owner, b := range owners {
		if r, ok := listed[owner]; !ok || r.flat != b {
			t.Errorf("owner %s: listed %v with %d B, want %d B", owner, ok, r.flat, b)
		}
	}

	// -tags splits the bytes by category.
	b, err := exec.Command(goTool(t), "tool", "pprof", "-tags", "-unit=B", file).CombinedOutput()
	if err != nil {
		t.Fatalf("go tool pprof -tags: %v\n%s", err, b)
	}
	for c := mem.Category(0); c < mem.NumCategories; c++ {
		if p.Totals[c] == 0 {
			continue
		}
		want := strconv.FormatInt(p.Totals[c], 10) + "B"
		if !strings.Contains(string(b), want) || !strings.Contains(string(b), ": "+c.String()) {
			t.Errorf("pprof -tags does not show %s = %s:\n%s", c, want, b)
		}
	}
}
