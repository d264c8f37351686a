package cpu

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/graph"

	"github.com/headroom-ml/headroom/kernels"
	"github.com/headroom-ml/headroom/tensor"
)

func TestChoicesFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "c", "choices.tsv")
	c, err := NewChoices("measure", file, true)
	if err != nil {
		t.Fatal(err)
	}
	g := kernels.ConvGeom{N: 2, H: 8, W: 8, C: 16, KH: 3, KW: 3, SH: 1, SW: 1, PadTop: 1, PadLeft: 1, OH: 8, OW: 8}
	k1, k2 := c.convKey(2, kernels.ConvForward, g, 32), c.convKey(2, kernels.ConvFilterGrad, g, 32)
	k3 := c.matMulKey(2, 32, 1024, 256, true, false)
	c.table[k1] = choice{algo: "direct", times: "direct=1ms,im2col=2ms"}
	c.table[k2] = choice{algo: "im2col", times: "direct=3ms,im2col=2ms"}
	c.table[k3] = choice{algo: "tiles", times: "packed=1ms,tiles=0.5ms"}
	c.table["other cpu\t1\tconv2d\t1,1,1,1,1,1,1,1,0,0,1,1\t16"] = choice{algo: "direct", times: "-"}
	if err := c.save(); err != nil {
		t.Fatal(err)
	}
	d, _ := NewChoices("measure", file, true)
	if err := d.load(); err != nil {
		t.Fatal(err)
	}
	if len(d.table) != 4 || d.table[k1].algo != "direct" || d.table[k2].algo != "im2col" || d.table[k3].algo != "tiles" {
		t.Errorf("read back %v, want the 4 choices written", d.table)
	}
	if got := d.Table(); len(got) != 3 {
		t.Errorf("Table() = %q, want this CPU's 3", got)
	}
	// a file of version 1 (convolutions only) is read
	v1 := choicesHeaderV1 + "\ncpu\t2\tconv2d\t2,8,8,16,3,3,1,1,1,1,8,8\t32\tdirect\tdirect=1ms\n"
	if table, err := parseChoices(strings.NewReader(v1)); err != nil || len(table) != 1 {
		t.Errorf("version 1: %v, %v", table, err)
	}
	b, _ := os.ReadFile(file)
	for _, bad := range []struct{ text, want string }{
		{"not a header\n", "line 1"},
		{choicesHeader + "\na\tb\n", "line 2: 2 fields"},
		{choicesHeader + "\ncpu\t0\tconv2d\t1,1,1,1,1,1,1,1,0,0,1,1\t16\tdirect\t-\n", "line 2: threads"},
		{choicesHeader + "\ncpu\t1\tconv2d\t1,1,1\t16\tdirect\t-\n", "line 2: geometry"},
		{choicesHeader + "\n\ncpu\t1\tconv2d\t1,1,1,1,1,1,1,1,0,0,1,1\t16\tauto\t-\n", "line 3: algorithm"},
		{string(b) + "cpu\t1\tconv2d\t1,1,1,1,1,1,1,1,0,0,1,1\t16\tfft\t-\n", "line 6: algorithm"},
		{choicesHeader + "\ncpu\t1\tconv3d\t1,1,1,1,1,1,1,1,0,0,1,1\t16\tdirect\t-\n", "line 2: product"},
		{choicesHeader + "\ncpu\t1\tmatmul\t1,1,1,2,0\t-\ttiles\t-\n", "line 2: matmul shape"},
		{choicesHeader + "\ncpu\t1\tmatmul\t1,1,1,0,0\t16\ttiles\t-\n", "line 2: matmul shape"},
		{choicesHeader + "\ncpu\t1\tmatmul\t1,1,1,0,0\t-\tdirect\t-\n", "line 2: unknown matrix product algorithm"},
	} {
		if err := os.WriteFile(file, []byte(bad.text), 0o644); err != nil {
			t.Fatal(err)
		}
		e, _ := NewChoices("measure", file, true)
		if err := e.load(); err == nil || !strings.Contains(err.Error(), bad.want) || !strings.Contains(err.Error(), file) {
			t.Errorf("%q: got error %v, want one naming %s and %q", bad.text, err, file, bad.want)
		}
	}
	if _, err := NewChoices("fastest", "", true); err == nil {
		t.Error(`NewChoices("fastest"): no error`)
	}
}

func FuzzParseChoices(f *testing.F) {
	f.Add(choicesHeader + "\ncpu\t2\tconv2d\t2,8,8,16,3,3,1,1,1,1,8,8\t32\tdirect\tdirect=1ms\n")
	f.Add(choicesHeader + "\ncpu\t2\tmatmul\t32,1024,256,0,0\t-\ttiles\tpacked=1ms\n")
	f.Add(choicesHeader + "\n\n")
	f.Add("x")
	f.Fuzz(func(t *testing.T, data string) {
		table, err := parseChoices(strings.NewReader(data))
		if err != nil {
			return
		}
		for k, v := range table {
			_, convErr := kernels.ParseConvAlgo(v.algo)
			_, mmErr := kernels.ParseMatMulAlgo(v.algo)
			if strings.Count(k, "\t") != 4 || v.algo == "auto" || (convErr != nil) == (mmErr != nil) {
				t.Fatalf("got %q: %+v from %q", k, v, data)
			}
		}
	})
}

// TestChoicesWinograd checks that Winograd is a candidate for a 3×3
// stride-1 product, that HEADROOM_WINOGRAD=off's choices leave it out and
// measure again a shape whose kept choice is Winograd, and that the forced
// mode picks it.
func TestChoicesWinograd(t *testing.T) {
	g := kernels.ConvGeom{N: 2, H: 8, W: 8, C: 16, KH: 3, KW: 3, SH: 1, SW: 1, PadTop: 1, PadLeft: 1, OH: 8, OW: 8}
	pool := kernels.NewPool(1)
	defer pool.Close()
	b := &Bound{Instr: &compile.Instr{Op: graph.OpConv2D, Window: &compile.WindowGeom{Geom: compile.Window(g), F: 16}}, pool: pool}
	run := func(kernels.ConvAlgo) {}
	// without the direct tiles (no AVX-512, or the purego build) direct is
	// not a candidate
	tiles := slices.Contains(kernels.ConvAlgos(kernels.ConvForward, g, 16), kernels.ConvDirect)
	for _, on := range []bool{true, false} {
		c, err := NewChoices("measure", "", on)
		if err != nil {
			t.Fatal(err)
		}
		key := c.convKey(1, kernels.ConvForward, g, 16)
		c.table[key] = choice{algo: "winograd", times: "-"}
		var algo kernels.ConvAlgo
		p := c.pick(b, kernels.ConvForward, &algo, run)
		switch {
		case on && (p != nil || algo != kernels.ConvWinograd):
			t.Errorf("on: pending %v, algorithm %v; want the kept winograd", p, algo)
		case !on && tiles && (p == nil || slices.Contains(p.names, "winograd") || slices.Contains(p.names, "winograd4")):
			t.Errorf("off: pending %+v; want a measurement without winograd and winograd4", p)
		case !on && !tiles && (p != nil || algo != kernels.ConvAuto):
			// im2col alone is left: nothing to measure, the rule runs
			t.Errorf("off, no direct tiles: pending %+v, algorithm %v; want none and the rule", p, algo)
		}
	}
	// a choice timed without a candidate now offered (a file from before
	// Winograd, or written with it off) is measured again with it; one
	// timed with more candidates than are offered, or pinned by hand
	// ("-"), is kept
	type keptCase struct {
		on           bool
		kept, times  string
		want         kernels.ConvAlgo
		measureAgain bool
	}
	cases := []keptCase{
		{true, "direct", "direct=1ms,im2col=2ms", 0, true},
		{true, "direct", "direct=1ms,im2col=2ms,winograd=3ms", 0, true}, // from before F(4×4, 3×3)
		{true, "direct", "direct=1ms,im2col=2ms,winograd=3ms,winograd4=4ms", kernels.ConvDirect, false},
		{false, "direct", "direct=1ms,im2col=2ms", kernels.ConvDirect, false},
		{false, "im2col", "direct=3ms,im2col=2ms,winograd=1ms", kernels.ConvIm2col, false},
		{true, "im2col", "-", kernels.ConvIm2col, false},
	}
	if !tiles { // im2col and Winograd's two forms are offered
		cases = []keptCase{
			{true, "im2col", "im2col=2ms", 0, true},
			{true, "im2col", "im2col=2ms,winograd=3ms", 0, true},
			{true, "im2col", "im2col=2ms,winograd=3ms,winograd4=4ms", kernels.ConvIm2col, false},
			{true, "direct", "direct=1ms,im2col=2ms,winograd=3ms,winograd4=4ms", 0, true}, // a file from a CPU with tiles
			{false, "im2col", "im2col=2ms,winograd=1ms", kernels.ConvAuto, false},         // im2col alone: the rule
			{true, "winograd4", "-", kernels.ConvWinograd4, false},
		}
	}
	for _, tc := range cases {
		c, _ := NewChoices("measure", "", tc.on)
		c.table[c.convKey(1, kernels.ConvForward, g, 16)] = choice{algo: tc.kept, times: tc.times}
		var algo kernels.ConvAlgo
		p := c.pick(b, kernels.ConvForward, &algo, run)
		if tc.measureAgain != (p != nil) || !tc.measureAgain && algo != tc.want {
			t.Errorf("winograd on %v, kept %s timed %q: pending %+v, algorithm %v", tc.on, tc.kept, tc.times, p, algo)
		}
		if p != nil && (!slices.Contains(p.names, "winograd") || !slices.Contains(p.names, "winograd4")) {
			t.Errorf("kept %s timed %q: measured again over %v, want winograd and winograd4 among them", tc.kept, tc.times, p.names)
		}
	}
	for _, form := range []kernels.ConvAlgo{kernels.ConvWinograd, kernels.ConvWinograd4} {
		c, _ := NewChoices(form.String(), "", true)
		var algo kernels.ConvAlgo
		if p := c.pick(b, kernels.ConvForward, &algo, run); p != nil || algo != form {
			t.Errorf("forced %v: pending %v, algorithm %v", form, p, algo)
		}
		if _, err := NewChoices(form.String(), "", false); err == nil {
			t.Errorf("forced %v with Winograd off: no error", form)
		}
	}
}

// TestChoicesMatMul checks a matrix product's choices: the rule and the
// convolutions' forced modes keep the packed product, a forced product
// algorithm is picked where it can run, a kept choice is used, and a shape
// not in the table is measured over every candidate.
func TestChoicesMatMul(t *testing.T) {
	pool := kernels.NewPool(2)
	defer pool.Close()
	b := &Bound{Instr: &compile.Instr{Op: graph.OpMatMul}, pool: pool}
	const m, n, k = 32, 1024, 256
	algos := kernels.MatMulAlgos(m, n, k, false, false, false, 2)
	if !slices.Contains(algos, kernels.MatMulPackedOne) {
		t.Fatalf("candidates %v: want packed1 on 2 threads", algos)
	}
	for _, mode := range []string{"rule", "direct", "winograd", "packed1", "tiles", "tiles1"} {
		c, err := NewChoices(mode, "", true)
		if err != nil {
			t.Fatal(err)
		}
		algo := kernels.MatMulTilesOne + 1
		p := c.pickMatMul(b, m, n, k, false, false, &algo, func(kernels.MatMulAlgo) {})
		want := kernels.MatMulPacked
		if a, err := kernels.ParseMatMulAlgo(mode); err == nil && slices.Contains(algos, a) {
			want = a
		}
		if p != nil || algo != want {
			t.Errorf("%s: pending %v, algorithm %v; want %v", mode, p, algo, want)
		}
	}
	c, _ := NewChoices("measure", "", true)
	var algo kernels.MatMulAlgo
	ran := map[kernels.MatMulAlgo]int{}
	p := c.pickMatMul(b, m, n, k, false, false, &algo, func(a kernels.MatMulAlgo) { ran[a]++ })
	if p == nil || len(p.names) != len(algos) {
		t.Fatalf("measure: pending %+v, want one over %v", p, algos)
	}
	got, i := timeAlgos(p)
	p.set(i)
	if len(ran) != len(algos) || got.algo != algo.String() || !strings.Contains(got.times, "packed1=") {
		t.Errorf("measured %+v, algorithm %v, runs %v", got, algo, ran)
	}
	c.table[c.matMulKey(2, m, n, k, false, false)] = choice{algo: "packed1", times: "-"}
	if p := c.pickMatMul(b, m, n, k, false, false, &algo, nil); p != nil || algo != kernels.MatMulPackedOne {
		t.Errorf("kept packed1: pending %v, algorithm %v", p, algo)
	}
}

// TestChoicesShared checks that processes sharing a choices file take one
// choice per shape: a process that read the file before another measured
// a shape takes the other's choice instead of timing it (merge), and
// processes measuring the same shapes at once time each shape once (the
// file's lock). Each Choices stands for a process: its own table, its
// own descriptor on the lock file. It also checks that a file that
// cannot be written leaves the choices measured and the error kept.
func TestChoicesShared(t *testing.T) {
	// two threads and products that split over them: packed and packed1
	// are candidates in every build (the purego one has no tiles)
	pool := kernels.NewPool(2)
	defer pool.Close()
	p := &compile.Program{Plan: &compile.Plan{Buffers: []compile.Buffer{{Kind: compile.KindArena}}}}
	b := &Bound{Instr: &compile.Instr{Op: graph.OpMatMul, Out: 0, Work: -1}, pool: pool}
	shapes := [][3]int{{64, 256, 128}, {96, 384, 64}, {128, 512, 64}}
	for _, s := range shapes {
		if algos := kernels.MatMulAlgos(s[0], s[1], s[2], false, false, false, 2); len(algos) < 2 {
			t.Fatalf("%v: candidates %v, want two at least", s, algos)
		}
	}
	// todo returns c's pending measurements of the shapes, the algorithm
	// each product took written to got[i], and counts its candidates' runs
	todo := func(c *Choices, got []kernels.MatMulAlgo, runs *int) []*pending {
		var out []*pending
		for i, s := range shapes {
			pd := c.pickMatMul(b, s[0], s[1], s[2], false, false, &got[i], func(kernels.MatMulAlgo) { *runs++ })
			if pd != nil {
				out = append(out, pd)
			}
		}
		return out
	}
	file := filepath.Join(t.TempDir(), "choices.tsv")
	first, _ := NewChoices("measure", file, true)
	late, _ := NewChoices("measure", file, true)
	if err := late.load(); err != nil { // read before the first process measured
		t.Fatal(err)
	}
	got1, got2 := make([]kernels.MatMulAlgo, len(shapes)), make([]kernels.MatMulAlgo, len(shapes))
	var runs1, runs2 int
	if err := first.measure(p, todo(first, got1, &runs1)); err != nil {
		t.Fatal(err)
	}
	if _, timed := first.Spent(); timed != len(shapes) || runs1 == 0 {
		t.Fatalf("first process timed %d shapes (%d runs), want %d", timed, runs1, len(shapes))
	}
	// the late process's table is older than the file: it must take the
	// file's lines, not time the shapes again
	pend := todo(late, got2, &runs2)
	if len(pend) != len(shapes) {
		t.Fatalf("late process: %d pending, want %d (it read the file before the shapes were timed)", len(pend), len(shapes))
	}
	if err := late.measure(p, pend); err != nil {
		t.Fatal(err)
	}
	if _, timed := late.Spent(); timed != 0 || runs2 != 0 || !slices.Equal(got1, got2) {
		t.Errorf("late process timed %d shapes (%d runs) and took %v; want none timed and %v", timed, runs2, got2, got1)
	}

	// processes measuring the same shapes at once: one times them, the
	// others wait on the lock and read its lines
	file = filepath.Join(t.TempDir(), "choices.tsv")
	const procs = 4
	cs := make([]*Choices, procs)
	gots := make([][]kernels.MatMulAlgo, procs)
	runs := make([]int, procs)
	pends := make([][]*pending, procs)
	for i := range cs {
		cs[i], _ = NewChoices("measure", file, true)
		if err := cs[i].load(); err != nil {
			t.Fatal(err)
		}
		gots[i] = make([]kernels.MatMulAlgo, len(shapes))
		pends[i] = todo(cs[i], gots[i], &runs[i])
	}
	errs := make(chan error, procs)
	for i := range cs {
		go func() { errs <- cs[i].measure(p, pends[i]) }()
	}
	for range cs {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	total := 0
	for i := range cs {
		_, timed := cs[i].Spent()
		total += timed
		if !slices.Equal(gots[i], gots[0]) {
			t.Errorf("process %d took %v, process 0 %v", i, gots[i], gots[0])
		}
	}
	if total != len(shapes) {
		t.Errorf("%d shapes timed over %d processes, want %d (each once)", total, procs, len(shapes))
	}

	// past the measuring budget, shapes keep the rule, unrecorded, and
	// are counted; the next process times them
	file = filepath.Join(t.TempDir(), "choices.tsv")
	spent, _ := NewChoices("measure", file, true)
	spent.budget = 0
	gotB := make([]kernels.MatMulAlgo, len(shapes))
	var runsB int
	if err := spent.measure(p, todo(spent, gotB, &runsB)); err != nil {
		t.Fatal(err)
	}
	if _, timed := spent.Spent(); timed != 0 || runsB != 0 || spent.Deferred() != len(shapes) || len(spent.Table()) != 0 {
		t.Errorf("budget spent: %d timed (%d runs), %d deferred, table %q; want 0, %d and none", timed, runsB, spent.Deferred(), spent.Table(), len(shapes))
	}
	next, _ := NewChoices("measure", file, true)
	if err := next.measure(p, todo(next, gotB, &runsB)); err != nil {
		t.Fatal(err)
	}
	if _, timed := next.Spent(); timed != len(shapes) {
		t.Errorf("the process after a spent budget timed %d shapes, want %d", timed, len(shapes))
	}

	// a file that cannot be written: the run goes on, the error is kept
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "not-a-dir"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ro, _ := NewChoices("measure", filepath.Join(dir, "not-a-dir", "choices.tsv"), true)
	got := make([]kernels.MatMulAlgo, len(shapes))
	var n int
	if err := ro.measure(p, todo(ro, got, &n)); err != nil {
		t.Fatalf("unwritable file: %v, want the run to go on", err)
	}
	if _, timed := ro.Spent(); timed != len(shapes) || ro.FileErr() == nil {
		t.Errorf("unwritable file: %d shapes timed, save error %v; want %d and an error", timed, ro.FileErr(), len(shapes))
	}
}

// TestConvAlgosWorkspace checks that F(4×4, 3×3) never grows a plan: it is
// offered where the other algorithms' workspace holds it (a batch of 128
// on the ResNet-20's 7×7×64 layer) and left out where it would need more
// (the same layer's filter gradient at batch 1), and the workspace
// planned is what the others need either way.
func TestConvAlgosWorkspace(t *testing.T) {
	for _, c := range []struct {
		n    int
		kind kernels.ConvKind
		wg4  bool
	}{
		{128, kernels.ConvForward, true},
		{128, kernels.ConvFilterGrad, true},
		{1, kernels.ConvFilterGrad, false},
	} {
		g := kernels.ConvGeom{N: c.n, H: 7, W: 7, C: 64, KH: 3, KW: 3, SH: 1, SW: 1, PadTop: 1, PadLeft: 1, OH: 7, OW: 7}
		it := &compile.Instr{Op: graph.OpConv2D, DType: tensor.Float32, Window: &compile.WindowGeom{Geom: compile.Window(g), F: 64}}
		algos := convAlgos(c.kind, it)
		ws := convChoiceWorkspace(c.kind, it)
		need := func(a kernels.ConvAlgo) int64 { return 4 * int64(kernels.WinogradWork(a, c.kind, g, 64)) }
		if !slices.Contains(algos, kernels.ConvWinograd) || slices.Contains(algos, kernels.ConvWinograd4) != c.wg4 {
			t.Errorf("batch %d %v: algorithms %v, want winograd4 among them: %v", c.n, c.kind, algos, c.wg4)
		}
		if ws < need(kernels.ConvWinograd) || c.wg4 && ws < need(kernels.ConvWinograd4) || !c.wg4 && ws >= need(kernels.ConvWinograd4) {
			t.Errorf("batch %d %v: workspace %d bytes; winograd needs %d, winograd4 %d", c.n, c.kind, ws, need(kernels.ConvWinograd), need(kernels.ConvWinograd4))
		}
	}
}
