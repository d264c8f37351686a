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
)

func TestChoicesFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "c", "choices.tsv")
	c, err := NewChoices("measure", file, true)
	if err != nil {
		t.Fatal(err)
	}
	g := kernels.ConvGeom{N: 2, H: 8, W: 8, C: 16, KH: 3, KW: 3, SH: 1, SW: 1, PadTop: 1, PadLeft: 1, OH: 8, OW: 8}
	k1, k2 := c.convKey(2, kernels.ConvForward, g, 32), c.convKey(2, kernels.ConvFilterGrad, g, 32)
	c.table[k1] = choice{algo: kernels.ConvDirect, times: "direct=1ms,im2col=2ms"}
	c.table[k2] = choice{algo: kernels.ConvIm2col, times: "direct=3ms,im2col=2ms"}
	c.table["other cpu\t1\tconv2d\t1,1,1,1,1,1,1,1,0,0,1,1\t16"] = choice{algo: kernels.ConvDirect, times: "-"}
	if err := c.save(); err != nil {
		t.Fatal(err)
	}
	d, _ := NewChoices("measure", file, true)
	if err := d.load(); err != nil {
		t.Fatal(err)
	}
	if len(d.table) != 3 || d.table[k1].algo != kernels.ConvDirect || d.table[k2].algo != kernels.ConvIm2col {
		t.Errorf("read back %v, want the 3 choices written", d.table)
	}
	if got := d.Table(); len(got) != 2 {
		t.Errorf("Table() = %q, want this CPU's 2", got)
	}
	b, _ := os.ReadFile(file)
	for _, bad := range []struct{ text, want string }{
		{"not a header\n", "line 1"},
		{choicesHeader + "\na\tb\n", "line 2: 2 fields"},
		{choicesHeader + "\ncpu\t0\tconv2d\t1,1,1,1,1,1,1,1,0,0,1,1\t16\tdirect\t-\n", "line 2: threads"},
		{choicesHeader + "\ncpu\t1\tconv2d\t1,1,1\t16\tdirect\t-\n", "line 2: geometry"},
		{choicesHeader + "\n\ncpu\t1\tconv2d\t1,1,1,1,1,1,1,1,0,0,1,1\t16\tauto\t-\n", "line 3: algorithm"},
		{string(b) + "cpu\t1\tconv2d\t1,1,1,1,1,1,1,1,0,0,1,1\t16\tfft\t-\n", "line 5: algorithm"},
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
	f.Add(choicesHeader + "\n\n")
	f.Add("x")
	f.Fuzz(func(t *testing.T, data string) {
		table, err := parseChoices(strings.NewReader(data))
		if err != nil {
			return
		}
		for k, v := range table {
			if strings.Count(k, "\t") != 4 || (v.algo != kernels.ConvDirect && v.algo != kernels.ConvIm2col && v.algo != kernels.ConvWinograd) {
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
	for _, on := range []bool{true, false} {
		c, err := NewChoices("measure", "", on)
		if err != nil {
			t.Fatal(err)
		}
		key := c.convKey(1, kernels.ConvForward, g, 16)
		c.table[key] = choice{algo: kernels.ConvWinograd, times: "-"}
		var algo kernels.ConvAlgo
		p := c.pick(b, kernels.ConvForward, &algo, run)
		switch {
		case on && (p != nil || algo != kernels.ConvWinograd):
			t.Errorf("on: pending %v, algorithm %v; want the kept winograd", p, algo)
		case !on && (p == nil || slices.Contains(p.algos, kernels.ConvWinograd)):
			t.Errorf("off: pending %+v; want a measurement without winograd", p)
		}
	}
	c, _ := NewChoices("winograd", "", true)
	var algo kernels.ConvAlgo
	if p := c.pick(b, kernels.ConvForward, &algo, run); p != nil || algo != kernels.ConvWinograd {
		t.Errorf("forced: pending %v, algorithm %v", p, algo)
	}
	if _, err := NewChoices("winograd", "", false); err == nil {
		t.Error("forced winograd with Winograd off: no error")
	}
}
