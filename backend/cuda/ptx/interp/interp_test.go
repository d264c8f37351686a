package interp_test

import (
	"encoding/binary"
	"errors"
	"math"
	"regexp"
	"strings"
	"testing"

	"github.com/headroom-ml/headroom/backend/cuda/ptx"
	"github.com/headroom-ml/headroom/backend/cuda/ptx/interp"
	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

var arch = ptx.Arch{SM: 90, Version: 78}

// render returns the first kernel of it's rendering and its launch.
func render(t *testing.T, it compile.Instr) (*ptx.Kernel, ptx.Step) {
	t.Helper()
	l, err := ptx.Render(arch, &it, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range l.Steps {
		if s.Kernel != nil {
			return s.Kernel, s
		}
	}
	t.Fatal("no kernel")
	return nil, ptx.Step{}
}

// load parses and decodes text's entry name.
func load(t *testing.T, text, name string) *interp.Program {
	t.Helper()
	m, err := interp.Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	p, err := interp.Decode(m, name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func floats(n int, f func(i int) float32) []byte {
	b := make([]byte, 4*n)
	for i := 0; i < n; i++ {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f(i)))
	}
	return b
}

// The elementwise kernel of an addition over 1000 elements, with its
// bound check planted one element too far: the thread of element 1000
// reads and writes past the buffers, and the interpreter names the
// access, the kernel and the thread. The kernel as rendered runs clean.
func TestOutOfBoundsIsCaught(t *testing.T) {
	it := compile.Instr{Op: graph.OpAdd, DType: tensor.Float32, InDType: tensor.Float32, Shape: []int{1000},
		Broadcast: &compile.BroadcastGeom{Path: compile.PathSame, AStrides: []int{1}, BStrides: []int{1}}}
	k, step := render(t, it)
	run := func(text string) error {
		out, a, b := make([]byte, 4000), floats(1000, func(i int) float32 { return float32(i) }), floats(1000, func(int) float32 { return 1 })
		p := load(t, text, k.Name)
		return p.Run(interp.Launch{Grid: step.Grid, Block: k.Block, Args: []uint64{1 << 20, 2 << 20, 3 << 20},
			Buffers: []interp.Buffer{{Name: "out", Addr: 1 << 20, Data: out}, {Name: "a", Addr: 2 << 20, Data: a}, {Name: "b", Addr: 3 << 20, Data: b}}})
	}
	if err := run(k.Text); err != nil {
		t.Fatalf("the kernel as rendered: %v", err)
	}
	planted := strings.Replace(k.Text, ", 1000;", ", 1001;", 1)
	if planted == k.Text {
		t.Fatal("no bound check to plant the bug in")
	}
	err := run(planted)
	var e *interp.Error
	if !errors.As(err, &e) || !strings.Contains(e.Msg, "out-of-bounds") || e.Thread != 1000%k.Block || e.Block != 1000/k.Block {
		t.Fatalf("got %v, want an out-of-bounds error of block %d, thread %d", err, 1000/k.Block, 1000%k.Block)
	}
	t.Log(err)
}

// A row reduction's tree in shared memory with one of its barriers
// removed: threads read partial sums other threads wrote since the last
// barrier, a race the interpreter reports whatever order it runs the
// threads in. With every barrier the kernel runs clean.
func TestSharedMemoryRaceIsCaught(t *testing.T) {
	it := compile.Instr{Op: graph.OpReduceSum, DType: tensor.Float32, InDType: tensor.Float32, Shape: []int{3, 1},
		Reduce: &compile.ReduceGeom{XShape: []int{3, 1000}, DstStrides: []int{1, 0}}}
	k, step := render(t, it)
	if !strings.Contains(k.Text, "bar.sync") {
		t.Fatalf("%s has no barrier", k.Name)
	}
	run := func(text string) error {
		out, x := make([]byte, 12), floats(3000, func(i int) float32 { return 1 })
		p := load(t, text, k.Name)
		return p.Run(interp.Launch{Grid: step.Grid, Block: k.Block, Args: []uint64{1 << 20, 2 << 20},
			Buffers: []interp.Buffer{{Name: "out", Addr: 1 << 20, Data: out}, {Name: "x", Addr: 2 << 20, Data: x}}})
	}
	if err := run(k.Text); err != nil {
		t.Fatalf("the kernel as rendered: %v", err)
	}
	// drop the barrier after the first level of the tree (the second
	// bar.sync of the kernel: the first follows the threads' stores)
	bars := regexp.MustCompile(`\tbar\.sync 0;\n`).FindAllStringIndex(k.Text, -1)
	planted := k.Text[:bars[1][0]] + k.Text[bars[1][1]:]
	err := run(planted)
	var e *interp.Error
	if !errors.As(err, &e) || !strings.Contains(e.Msg, "shared-memory race") {
		t.Fatalf("got %v, want a shared-memory race", err)
	}
	t.Log(err)
}

// A barrier some threads of the block never reach (they returned) is
// reported, not run as if they had.
func TestDivergentBarrierIsCaught(t *testing.T) {
	text := `.version 7.8
.target sm_90
.address_size 64

.visible .entry divergent(
	.param .u64 ARG_0
)
.maxntid 64, 1, 1
{
	.reg .pred %p<2>;
	.reg .b32 %r<2>;
	mov.u32 %r1, %tid.x;
	setp.ge.u32 %p1, %r1, 32;
	@%p1 ret;
	bar.sync 0;
	ret;
}
`
	p := load(t, text, "divergent")
	err := p.Run(interp.Launch{Grid: 1, Block: 64, Args: []uint64{0}})
	var e *interp.Error
	if !errors.As(err, &e) || !strings.Contains(e.Msg, "barrier") {
		t.Fatalf("got %v, want a barrier fault", err)
	}
	t.Log(err)
}

// The parser refuses what it does not read, naming the line.
func TestParseErrors(t *testing.T) {
	head := ".version 7.8\n.target sm_90\n.address_size 64\n.visible .entry k(.param .u64 A)\n{\n\t.reg .b32 %r<3>;\n"
	for _, tc := range []struct{ name, body, want string }{
		{"undeclared register", "\tmov.u32 %r9, 1;\n", "not declared"},
		{"unknown opcode", "\tfrob.u32 %r1, %r2;\n", "unknown"},
		{"approximate float", "\tex2.approx.f32 %r1, %r2;\n", "not run"},
		{"no semicolon", "\tmov.u32 %r1, 1\n", "expected , or ;"},
		{"bad label", "\tbra NOWHERE;\n", "no label"},
		{"two labels", "L1:\nL1:\n", "twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := interp.Parse(head + tc.body + "}\n")
			if err == nil {
				_, err = interp.Decode(m, "k")
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "line") {
				t.Fatalf("got %v, want an error with %q and a line", err, tc.want)
			}
		})
	}
}

// FuzzParse: any text parses and decodes, or is refused with an error;
// never a panic.
func FuzzParse(f *testing.F) {
	for _, it := range []compile.Instr{
		{Op: graph.OpExp, DType: tensor.Float32, InDType: tensor.Float32, Shape: []int{100}, In: []int{1}},
		{Op: graph.OpReduceMax, DType: tensor.Float32, InDType: tensor.Float32, Shape: []int{3, 1},
			Reduce: &compile.ReduceGeom{XShape: []int{3, 1000}, DstStrides: []int{1, 0}}},
	} {
		l, err := ptx.Render(arch, &it, nil)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(l.Steps[0].Kernel.Text)
	}
	f.Add(".version 7.8\n.visible .entry k(\n{\n")
	f.Fuzz(func(t *testing.T, text string) {
		m, err := interp.Parse(text)
		if err != nil {
			return
		}
		for _, e := range m.Entries {
			interp.Decode(m, e.Name)
		}
	})
}
