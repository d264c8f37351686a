package compile_test

import (
	"testing"

	"github.com/headroom-ml/headroom/autodiff"
	"github.com/headroom-ml/headroom/backend/cpu"
	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/tensor"
)

// attentionStep builds attention over q, k, v [B, T, H, D] parameters
// with the loss sum(o), differentiated when train is set.
func attentionStep(train bool, B, T, H, D int) (*graph.Graph, compile.Options) {
	g := graph.New()
	s := tensor.Shape{B, T, H, D}
	q, k, v := g.Param("q", tensor.Float32, s), g.Param("k", tensor.Float32, s), g.Param("v", tensor.Float32, s)
	o := graph.Attention(q, k, v, graph.AttentionOptions{Causal: graph.CausalTopLeft})
	loss := graph.ReduceSum(o)
	opt := compile.Options{Target: cpu.New(2), Outputs: []compile.Output{{Name: "loss", Node: loss}}}
	if train {
		for i, gr := range autodiff.Grad(loss, q, k, v) {
			opt.Outputs = append(opt.Outputs, compile.Output{Name: string(rune('q' + i)), Node: gr, Grad: true})
		}
	}
	return g, opt
}

// TestAttentionPlan: attention is planned as one instruction whose part,
// the log-sum-exp [B, H, T], gets a buffer of its own, an activation the
// backward pass reads (the T×T probabilities are never a buffer); its
// gradient's instruction writes dk and dv, its parts; the kernels' blocks
// are the instructions' workspace. Without a backward pass nobody reads
// the log-sum-exp: it lives in the forward instruction's workspace, not in
// a buffer of its own.
func TestAttentionPlan(t *testing.T) {
	const B, T, H, D = 2, 256, 2, 16
	rows := int64(B * H * T * 4)
	for _, train := range []bool{true, false} {
		p, err := compile.Build(func() (*graph.Graph, compile.Options) { return attentionStep(train, B, T, H, D) })
		if err != nil {
			t.Fatal(err)
		}
		var lse []compile.Buffer
		var fwd, bwd *compile.Instr
		for i := range p.Instrs {
			switch in := &p.Instrs[i]; in.Op {
			case graph.OpAttention:
				fwd = in
			case graph.OpAttentionGrad:
				bwd = in
			}
		}
		for _, b := range p.Plan.Buffers {
			if b.Shape.Equal(tensor.Shape{B, H, T}) {
				lse = append(lse, b)
			}
			if b.Shape.Size() >= T*T*B*H {
				t.Errorf("train %v: a buffer of %v (%s) is as large as the probabilities", train, b.Shape, b.Owner)
			}
		}
		if fwd == nil || len(fwd.Parts) != 1 {
			t.Fatalf("train %v: no attention instruction with one part: %+v", train, fwd)
		}
		work := p.Plan.Buffers[fwd.Work].Bytes
		if !train {
			if len(lse) != 0 || fwd.Parts[0] != -1 || bwd != nil {
				t.Errorf("inference: log-sum-exp buffers %v, part %d, gradient %v; want none, -1, none", lse, fwd.Parts[0], bwd)
			}
			if work < rows {
				t.Errorf("inference: workspace %d B, want at least the %d B of the log-sum-exp", work, rows)
			}
			continue
		}
		if len(lse) != 1 || lse[0].Category != mem.Activation || fwd.Parts[0] != lse[0].ID {
			t.Fatalf("training: log-sum-exp buffers %+v, part %v; want one activation, the forward's part", lse, fwd.Parts)
		}
		if lse[0].Start != instrIndex(p, fwd) || lse[0].End != instrIndex(p, bwd) {
			t.Errorf("log-sum-exp lives [%d, %d], want from the forward (%d) to the backward (%d)", lse[0].Start, lse[0].End, instrIndex(p, fwd), instrIndex(p, bwd))
		}
		if bwd == nil || len(bwd.Parts) != 2 || bwd.Parts[0] < 0 || bwd.Parts[1] < 0 {
			t.Fatalf("training: gradient instruction %+v, want two live parts (dk, dv)", bwd)
		}
		for _, id := range bwd.Parts {
			if b := p.Plan.Buffers[id]; b.Category != mem.Grad || b.Kind != compile.KindOutput || !b.Shape.Equal(tensor.Shape{B, T, H, D}) {
				t.Errorf("part buffer %+v: want the gradient output of k or v", b)
			}
		}
	}
}

func instrIndex(p *compile.Program, in *compile.Instr) int {
	for i := range p.Instrs {
		if &p.Instrs[i] == in {
			return i
		}
	}
	return -1
}

// TestUnsliceAddRunsInPlace: the gradients of several slices of one value
// are summed by unslice_add instructions that write over the sum so far,
// one buffer for all of them.
func TestUnsliceAddRunsInPlace(t *testing.T) {
	p, err := compile.Build(func() (*graph.Graph, compile.Options) {
		g := graph.New()
		x := g.Param("x", tensor.Float32, tensor.Shape{16, 64})
		var parts []*graph.Node
		for i := 0; i < 16; i++ {
			parts = append(parts, graph.Tanh(graph.Slice(x, []int{i, 0}, []int{i + 1, 64})))
		}
		loss := graph.ReduceSum(graph.Concat(0, parts...))
		gx := autodiff.Grad(loss, x)[0]
		out := graph.ReduceSum(graph.Mul(gx, gx)) // (the sum itself stays in the arena)
		return g, compile.Options{Target: cpu.New(0), Outputs: []compile.Output{{Name: "out", Node: out}}}
	})
	if err != nil {
		t.Fatal(err)
	}
	outs := map[int]bool{}
	n := 0
	for _, in := range p.Instrs {
		if in.Op == graph.OpUnsliceAdd {
			n++
			outs[in.Out] = true
		}
	}
	if n != 15 || len(outs) != 1 {
		t.Errorf("%d unslice_add instructions writing %d buffers, want 15 writing one", n, len(outs))
	}
}

// TestPartLivesUntilItsReaders: a part's buffer lives from its op's
// instruction to its own last reader, not its op's output's.
func TestPartLivesUntilItsReaders(t *testing.T) {
	var o, lse, read *graph.Node
	p, err := compile.Build(func() (*graph.Graph, compile.Options) {
		g := graph.New()
		s := tensor.Shape{1, 8, 2, 4}
		q := g.Input("q", tensor.Float32, s)
		o = graph.Attention(q, q, q, graph.AttentionOptions{})
		lse = graph.AttentionLSE(o)
		x := graph.ReduceSum(o) // the output's last reader
		for i := 0; i < 4; i++ {
			x = graph.Neg(graph.Exp(x))
		}
		read = graph.Mul(lse, x) // the part's, four steps later
		return g, compile.Options{Target: cpu.New(0), Outputs: []compile.Output{{Name: "out", Node: graph.ReduceSum(read)}},
			DisableFusion: true, DisableInPlace: true}
	})
	if err != nil {
		t.Fatal(err)
	}
	at := func(n *graph.Node) int {
		for i, in := range p.Instrs {
			if in.Node == n.ID() {
				return i
			}
		}
		t.Fatalf("no instruction for %s", n)
		return -1
	}
	for _, b := range p.Plan.Buffers {
		for _, id := range b.Nodes {
			switch id {
			case lse.ID():
				if b.Start != at(o) || b.End != at(read) {
					t.Errorf("log-sum-exp lives [%d, %d], want [%d, %d]", b.Start, b.End, at(o), at(read))
				}
			case o.ID():
				if b.End >= at(read) {
					t.Errorf("the attention's output lives until %d, past its last reader", b.End)
				}
			}
		}
	}
}
