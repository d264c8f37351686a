package compile_test

import (
	"fmt"
	"github.com/headroom-ml/headroom/backend/cpu"
	"strings"
	"testing"

	"github.com/headroom-ml/headroom/autodiff"
	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/internal/testutil"
	"github.com/headroom-ml/headroom/tensor"
)

// sgdStep adds gradients of loss for params, and SGD updates as graph ops;
// the gradients are kept as grad outputs.
func sgdStep(g *graph.Graph, loss *graph.Node, params []*graph.Node, lr float64) compile.Options {
	grads := autodiff.Grad(loss, params...)
	g.SetPhase(graph.Update)
	opt := compile.Options{Target: cpu.New(0), Outputs: []compile.Output{{Name: "loss", Node: loss}}}
	for i, p := range params {
		graph.Assign(p, graph.Sub(p, graph.MulScalar(grads[i], lr)))
		opt.Outputs = append(opt.Outputs, compile.Output{Name: "grad:" + p.Attr().Name, Node: grads[i], Grad: true})
	}
	return opt
}

func dense(g *graph.Graph, name string, x *graph.Node, out int) *graph.Node {
	g.PushScope(name)
	defer g.PopScope()
	w := g.Param(name+"/w", tensor.Float32, tensor.Shape{x.Shape()[1], out})
	b := g.Param(name+"/b", tensor.Float32, tensor.Shape{out})
	return graph.Add(graph.MatMul(x, w), b)
}

// The four graphs of the golden tests.
var planGraphs = []struct {
	name  string
	build func() (*graph.Graph, compile.Options)
}{
	{"mlp_step", func() (*graph.Graph, compile.Options) {
		// x [64, 784] -> 256 relu -> 10, softmax cross-entropy, SGD
		g := graph.New()
		x := g.Input("x", tensor.Float32, tensor.Shape{64, 784})
		y := g.Input("y", tensor.Int32, tensor.Shape{64})
		h := graph.Relu(dense(g, "dense1", x, 256))
		logits := dense(g, "dense2", h, 10)
		loss := graph.ReduceMean(graph.SoftmaxCrossEntropy(logits, y))
		p := []*graph.Node{}
		for _, n := range []string{"dense1/w", "dense1/b", "dense2/w", "dense2/b"} {
			v, _ := g.LookupVariable(n)
			p = append(p, v)
		}
		return g, sgdStep(g, loss, p, 0.1)
	}},
	{"residual_block", func() (*graph.Graph, compile.Options) {
		// x [32, 128] -> x + dense(relu(dense(x))), then a head; the skip
		// connection keeps x live across the block.
		g := graph.New()
		x := g.Input("x", tensor.Float32, tensor.Shape{32, 128})
		y := g.Input("y", tensor.Int32, tensor.Shape{32})
		h := graph.Relu(dense(g, "block/dense1", x, 128))
		r := graph.Relu(graph.Add(x, dense(g, "block/dense2", h, 128)))
		logits := dense(g, "head", r, 10)
		loss := graph.ReduceMean(graph.SoftmaxCrossEntropy(logits, y))
		var p []*graph.Node
		for _, v := range g.Variables() {
			p = append(p, v)
		}
		return g, sgdStep(g, loss, p, 0.1)
	}},
	{"long_lived_activation", func() (*graph.Graph, compile.Options) {
		// the first layer's activation is read again at the very end (a
		// U-Net-like skip), so it stays live across the whole forward pass
		// while smaller temporaries come and go beneath it.
		g := graph.New()
		x := g.Input("x", tensor.Float32, tensor.Shape{16, 512})
		a := graph.Tanh(dense(g, "enc", x, 512))
		h := a
		for i := 0; i < 4; i++ {
			h = graph.Relu(dense(g, fmt.Sprintf("mid%d", i), h, 64))
		}
		out := graph.Add(dense(g, "dec", h, 512), a)
		loss := graph.ReduceMean(graph.Square(out))
		var p []*graph.Node
		for _, v := range g.Variables() {
			p = append(p, v)
		}
		return g, sgdStep(g, loss, p, 0.01)
	}},
	{"inplace_chain", func() (*graph.Graph, compile.Options) {
		// a chain of elementwise ops over one [256, 256] value: each op
		// overwrites its input, so the chain needs one buffer, not six
		// (fusion is off here: it would remove the chain's buffers altogether).
		g, opt := elementwiseChain()
		opt.DisableFusion = true
		return g, opt
	}},
	{"fused_chain", elementwiseChain},
}

// elementwiseChain is six elementwise ops over one [256, 256] value, summed.
func elementwiseChain() (*graph.Graph, compile.Options) {
	g := graph.New()
	x := g.Input("x", tensor.Float32, tensor.Shape{256, 256})
	h := graph.Exp(x)
	h = graph.MulScalar(h, 0.5)
	h = graph.Tanh(h)
	h = graph.AddScalar(h, 1)
	h = graph.Sqrt(h)
	h = graph.Neg(h)
	return g, compile.Options{Target: cpu.New(0), Outputs: []compile.Output{{Name: "sum", Node: graph.ReduceSum(h)}}}
}

func TestPlanGolden(t *testing.T) {
	for _, c := range planGraphs {
		t.Run(c.name, func(t *testing.T) {
			p, err := compile.Build(c.build)
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Plan.Validate(); err != nil {
				t.Fatal(err)
			}
			ratio := float64(p.Plan.ArenaBytes) / float64(p.Plan.LowerBound)
			if ratio > 1.10 {
				t.Errorf("arena %d B is %.3fx the lower bound %d B, want <= 1.10", p.Plan.ArenaBytes, ratio, p.Plan.LowerBound)
			}
			testutil.Golden(t, c.name+".plan", p.Plan.String()+"\n"+instrs(p))
		})
	}
}

func instrs(p *compile.Program) string {
	var b strings.Builder
	b.WriteString("program:\n")
	for i, in := range p.Instrs {
		fmt.Fprintf(&b, "%3d %-28s b%d <- %v\n", i, in.Op, in.Out, in.In)
	}
	return b.String()
}

func TestInPlaceChainUsesOneBuffer(t *testing.T) {
	p, err := compile.Build(planGraphs[3].build)
	if err != nil {
		t.Fatal(err)
	}
	one := int64(256 * 256 * 4)
	if p.Plan.ArenaBytes != one {
		t.Errorf("arena %d B, want %d B (one [256,256] float32 buffer)", p.Plan.ArenaBytes, one)
	}
	noReuse, err := compile.Build(func() (*graph.Graph, compile.Options) {
		g, opt := planGraphs[3].build()
		opt.DisableInPlace, opt.DisableFusion = true, true
		return g, opt
	})
	if err != nil {
		t.Fatal(err)
	}
	if noReuse.Plan.ArenaBytes != 2*one {
		t.Errorf("without in-place reuse the arena is %d B, want %d B (two buffers ping-pong)", noReuse.Plan.ArenaBytes, 2*one)
	}
}

// TestFusionRemovesIntermediates: the six-op chain runs as one instruction
// whose only arena memory is its output and a few chunk-sized registers.
func TestFusionRemovesIntermediates(t *testing.T) {
	p, err := compile.Build(planGraphs[4].build)
	if err != nil {
		t.Fatal(err)
	}
	if p.Instrs[0].Op != graph.OpFused || len(p.Instrs) != 2 {
		t.Fatalf("program %v, want one fused instruction and the reduction", instrs(p))
	}
	if got, want := len(p.Instrs[0].Fused.Steps), 6; got != want {
		t.Errorf("fused %d steps, want %d", got, want)
	}
	out := int64(256 * 256 * 4)
	if p.Plan.ArenaBytes > out+16<<10 {
		t.Errorf("arena %d B, want the output (%d B) plus at most 16 KiB of registers", p.Plan.ArenaBytes, out)
	}
}

func TestAssignWritesInPlace(t *testing.T) {
	p, err := compile.Build(planGraphs[0].build)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range p.Instrs {
		if in.Op == graph.OpAssign {
			t.Errorf("instruction %s copies into a variable; the SGD update should write in place", in.Owner)
		}
	}
	p, err = compile.Build(func() (*graph.Graph, compile.Options) {
		g, opt := planGraphs[0].build()
		opt.DisableInPlace = true
		return g, opt
	})
	if err != nil {
		t.Fatal(err)
	}
	copies := 0
	for _, in := range p.Instrs {
		if in.Op == graph.OpAssign {
			copies++
		}
	}
	if copies != 4 {
		t.Errorf("without in-place reuse, %d assign copies, want 4", copies)
	}
}
