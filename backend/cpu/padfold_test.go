package cpu_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/headroom-ml/headroom/autodiff"
	"github.com/headroom-ml/headroom/backend/cpu"
	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

// padStep is a zero padding of x [N, H, W, C] then a "valid" convolution
// (as PyTorch's padding=1 with stride 2, which the ResNet-20 builds), a
// loss that weighs every output differently, and the gradients of x and
// the filter.
func padStep(t compile.Target, dt tensor.DType, h, c, k, s int, before, after [2]int) func() (*graph.Graph, compile.Options) {
	return func() (*graph.Graph, compile.Options) {
		g := graph.New()
		x := g.Input("x", dt, tensor.Shape{2, h, h + 1, c})
		w := g.Param("w", dt, tensor.Shape{k, k, c, 16})
		p := graph.Pad(x, []int{0, before[0], before[1], 0}, []int{0, after[0], after[1], 0})
		y := graph.Conv2D(p, w, [2]int{s, s}, false)
		wt := g.Input("wt", dt, y.Shape())
		loss := graph.ReduceSum(graph.Mul(y, wt), 0, 1, 2, 3)
		gr := autodiff.Grad(loss, x, w)
		return g, compile.Options{Target: t, Outputs: []compile.Output{{Name: "loss", Node: loss},
			{Name: "dx", Node: gr[0], Grad: true}, {Name: "dw", Node: gr[1], Grad: true}}}
	}
}

// TestPadFoldsIntoConv: a zero padding read only by a convolution and its
// filter gradient is not copied (no unslice runs: the convolutions read x
// with the padding in their window), the input gradient writes the
// unpadded gradient (no slice runs), the plan shrinks by the padded
// copies, and the loss and gradients equal the unfolded step's, for
// strides 1 and 2 and paddings that are and are not "same".
func TestPadFoldsIntoConv(t *testing.T) {
	cases := []struct {
		h, c, k, s    int
		before, after [2]int
	}{
		{8, 16, 3, 2, [2]int{1, 1}, [2]int{1, 1}}, // the ResNet-20's: nothing after is read
		{7, 16, 3, 2, [2]int{1, 1}, [2]int{1, 1}},
		{6, 3, 3, 1, [2]int{1, 1}, [2]int{1, 1}}, // "same" written as padding
		{6, 8, 5, 1, [2]int{2, 0}, [2]int{1, 2}}, // uneven
	}
	for _, dt := range []tensor.DType{tensor.Float32, tensor.Float64} {
		for _, c := range cases {
			name := fmt.Sprintf("%s/%dx%d/k%d/s%d/%v%v", dt, c.h, c.c, c.k, c.s, c.before, c.after)
			host := cpu.New(2)
			folded, err := compile.Build(padStep(host, dt, c.h, c.c, c.k, c.s, c.before, c.after))
			if err != nil {
				t.Fatal(err)
			}
			plain, err := compile.Build(padStep(without{host, compile.FusePadIntoConv}, dt, c.h, c.c, c.k, c.s, c.before, c.after))
			if err != nil {
				t.Fatal(err)
			}
			count := func(p *compile.Program) (moves int, padded bool) {
				for _, in := range p.Instrs {
					if in.Op == graph.OpUnslice || in.Op == graph.OpSlice {
						moves++
					}
					if in.Window != nil && (in.Window.Geom.PadTop > 0 || in.Window.Geom.PadLeft > 0) {
						padded = true
					}
				}
				return moves, padded
			}
			if moves, padded := count(folded); moves != 0 || !padded {
				t.Errorf("%s: %d unslice and slice instructions, windows padded %v; want none and padded", name, moves, padded)
			}
			if moves, _ := count(plain); moves != 2 {
				t.Errorf("%s: without the fold %d unslice and slice instructions, want 2", name, moves)
			}
			if folded.Plan.Peak >= plain.Plan.Peak {
				t.Errorf("%s: folded plan %d bytes, %d with the padded copy", name, folded.Plan.Peak, plain.Plan.Peak)
			}
			inputs, vars, outs := []string{"x", "wt"}, []string{"w"}, []string{"loss", "dx", "dw"}
			got, want := runStep(t, host, folded, uint64(c.h), inputs, vars, outs), runStep(t, host, plain, uint64(c.h), inputs, vars, outs)
			for o, w := range want {
				if len(got[o]) != len(w) {
					t.Fatalf("%s: %s has %d values folded, %d not", name, o, len(got[o]), len(w))
				}
				for i := range w {
					if d := math.Abs(got[o][i] - w[i]); d > 1e-4*max(1, math.Abs(w[i])) {
						t.Fatalf("%s: %s[%d] = %v folded, %v not", name, o, i, got[o][i], w[i])
					}
				}
			}
			host.Close()
		}
	}
}
