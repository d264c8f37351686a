package cpu_test

import (
	"math"
	"testing"

	"github.com/headroom-ml/headroom/autodiff"
	"github.com/headroom-ml/headroom/backend/cpu"
	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

// normStep is BatchNormalization's training step after a convolution: y
// = conv(x, w) (padded explicitly or "same"), its batch moments, y
// normalized, a loss that weighs every output differently, and the
// gradients of w and x.
func normStep(t compile.Target, dt tensor.DType, n, h, c, f int, padded bool) func() (*graph.Graph, compile.Options) {
	return func() (*graph.Graph, compile.Options) {
		g := graph.New()
		x := g.Input("x", dt, tensor.Shape{n, h, h, c})
		wt := g.Input("wt", dt, tensor.Shape{n, h, h, f})
		w := g.Param("w", dt, tensor.Shape{3, 3, c, f})
		var y *graph.Node
		if padded {
			y = graph.Conv2D(graph.Pad(x, []int{0, 1, 1, 0}, []int{0, 1, 1, 0}), w, [2]int{1, 1}, false)
		} else {
			y = graph.Conv2D(x, w, [2]int{1, 1}, true)
		}
		m := graph.Moments(y)
		mean := graph.Reshape(graph.Slice(m, []int{0, 0}, []int{1, f}), f)
		variance := graph.Reshape(graph.Slice(m, []int{1, 0}, []int{2, f}), f)
		scale := graph.Div(graph.ScalarLike(variance, 1), graph.Sqrt(graph.AddScalar(variance, 1e-3)))
		z := graph.Mul(graph.Sub(y, mean), scale)
		loss := graph.ReduceSum(graph.Mul(z, wt), 0, 1, 2, 3)
		gr := autodiff.Grad(loss, w, x)
		return g, compile.Options{Target: t, Outputs: []compile.Output{{Name: "loss", Node: loss}, {Name: "m", Node: m},
			{Name: "dw", Node: gr[0], Grad: true}, {Name: "dx", Node: gr[1], Grad: true}}}
	}
}

// TestConvMomentsFuse: the batch moments of a float32 convolution's
// output run in the convolution's instruction (no moments instruction;
// the conv2d writes them as its part), and the loss, the moments and the
// gradients are those of the moments apart bit for bit (the same groups
// of images, summed by the same code), for odd sizes, channels below, at
// and past the vector width, padding folded in or "same"; planned ==
// measured. float64 keeps its moments apart.
func TestConvMomentsFuse(t *testing.T) {
	for _, dt := range []tensor.DType{tensor.Float32, tensor.Float64} {
		for _, tc := range []struct {
			n, h, c, f int
			padded     bool
		}{{3, 7, 3, 16, false}, {2, 9, 16, 20, true}, {5, 6, 8, 32, false}, {4, 8, 5, 16, true}, {3, 5, 16, 16, true}} {
			host := cpu.New(2)
			fused, err := compile.Build(normStep(host, dt, tc.n, tc.h, tc.c, tc.f, tc.padded))
			if err != nil {
				t.Fatal(err)
			}
			withMoments, moments := 0, 0
			for _, in := range fused.Instrs {
				switch {
				case in.Op == graph.OpConv2D && in.Window.Moments:
					withMoments++
					if len(in.Parts) != 1 || in.Parts[0] < 0 {
						t.Errorf("%s %+v: the conv2d writes parts %v, want the moments", dt, tc, in.Parts)
					}
				case in.Op == graph.OpMoments:
					moments++
				}
			}
			if want := map[bool]int{true: 1, false: 0}[dt == tensor.Float32]; withMoments != want || moments != 1-want {
				t.Errorf("%s %+v: %d conv2d writing moments and %d moments instructions, want %d and %d", dt, tc, withMoments, moments, want, 1-want)
			}
			plain, err := compile.Build(normStep(without{host, compile.FuseConvMoments}, dt, tc.n, tc.h, tc.c, tc.f, tc.padded))
			if err != nil {
				t.Fatal(err)
			}
			for _, in := range plain.Instrs {
				if in.Window != nil && in.Window.Moments {
					t.Errorf("%s %+v: a conv2d writes moments without the fusion", dt, tc)
				}
			}
			inputs, vars, outs := []string{"x", "wt"}, []string{"w"}, []string{"loss", "m", "dw", "dx"}
			got, want := runStep(t, host, fused, uint64(tc.f), inputs, vars, outs), runStep(t, host, plain, uint64(tc.f), inputs, vars, outs)
			for name, w := range want {
				for i := range w {
					if math.Float64bits(got[name][i]) != math.Float64bits(w[i]) {
						t.Fatalf("%s %+v: %s[%d] = %v fused, %v apart: want the same bits", dt, tc, name, i, got[name][i], w[i])
					}
				}
			}
			host.Close()
		}
	}
}
