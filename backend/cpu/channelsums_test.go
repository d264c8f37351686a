package cpu_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/headroom-ml/headroom/autodiff"
	"github.com/headroom-ml/headroom/backend/cpu"
	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/runtime"
	"github.com/headroom-ml/headroom/tensor"
)

// without is the host target without one fusion.
type without struct {
	*cpu.Target
	f compile.Fusion
}

func (w without) Fuses(f compile.Fusion) bool { return f != w.f && w.Target.Fuses(f) }

// channelStep is y = relu(x·scale + shift) over the channels of x
// [N, H, W, C] (BatchNormalization's affine part and its activation), a
// loss that weighs every output differently, and the gradients of scale,
// shift and x.
func channelStep(t compile.Target, dt tensor.DType, c int) func() (*graph.Graph, compile.Options) {
	return func() (*graph.Graph, compile.Options) {
		g := graph.New()
		x := g.Input("x", dt, tensor.Shape{3, 5, 7, c})
		wt := g.Input("w", dt, tensor.Shape{3, 5, 7, c})
		scale := g.Param("scale", dt, tensor.Shape{c})
		shift := g.Param("shift", dt, tensor.Shape{c})
		y := graph.Relu(graph.Add(graph.Mul(x, scale), shift))
		loss := graph.ReduceSum(graph.Mul(y, wt), 0, 1, 2, 3)
		gr := autodiff.Grad(loss, scale, shift, x)
		return g, compile.Options{Target: t, Outputs: []compile.Output{{Name: "loss", Node: loss},
			{Name: "dscale", Node: gr[0], Grad: true}, {Name: "dshift", Node: gr[1], Grad: true}, {Name: "dx", Node: gr[2], Grad: true}}}
	}
}

// TestChannelSumsFuse: the gradients of a per-channel scale and shift,
// ReduceSum(g) and ReduceSum(Mul(g, x)), run as one reduce_sum that reads
// g and x (no product over the activation is written), and every gradient
// equals the one the two reductions give apart, in float32 and float64,
// for channels below, at and past the vector width; planned == measured.
func TestChannelSumsFuse(t *testing.T) {
	for _, dt := range []tensor.DType{tensor.Float32, tensor.Float64} {
		for _, c := range []int{3, 16, 20, 37} {
			host := cpu.New(2)
			fused, err := compile.Build(channelStep(host, dt, c))
			if err != nil {
				t.Fatal(err)
			}
			paired, bigMul := 0, 0
			for _, in := range fused.Instrs {
				if in.Op == graph.OpReduceSum && in.Reduce.Product {
					paired++
					if len(in.In) != 2 || len(in.Parts) != 1 || in.Parts[0] < 0 {
						t.Errorf("%s c=%d: the paired reduce_sum reads %v and writes parts %v, want g and x, and one part", dt, c, in.In, in.Parts)
					}
				}
				if in.Op == graph.OpMul && tensor.Shape(in.Shape).Size() > c {
					bigMul++
				}
			}
			plain, err := compile.Build(channelStep(without{host, compile.FuseChannelSums}, dt, c))
			if err != nil {
				t.Fatal(err)
			}
			plainMul := 0
			for _, in := range plain.Instrs {
				if in.Op == graph.OpReduceSum && in.Reduce.Product {
					t.Errorf("%s c=%d: a paired reduce_sum without the fusion", dt, c)
				}
				if in.Op == graph.OpMul && tensor.Shape(in.Shape).Size() > c {
					plainMul++
				}
			}
			// the loss's product and dx = g·scale stay; g·x is gone
			if paired != 1 || bigMul != plainMul-1 {
				t.Errorf("%s c=%d: %d paired reduce_sums and %d products over the activation (%d apart), want 1 and one fewer", dt, c, paired, bigMul, plainMul)
			}
			inputs := []string{"x", "w"}
			vars := []string{"scale", "shift"}
			outs := []string{"loss", "dscale", "dshift", "dx"}
			got, want := runStep(t, host, fused, uint64(c), inputs, vars, outs), runStep(t, host, plain, uint64(c), inputs, vars, outs)
			for name, w := range want {
				for i := range w {
					if d := math.Abs(got[name][i] - w[i]); d > 1e-5*max(1, math.Abs(w[i])) {
						t.Fatalf("%s c=%d: %s[%d] = %v fused, %v apart", dt, c, name, i, got[name][i], w[i])
					}
				}
			}
			host.Close()
		}
	}
}

// runStep runs p once with normal random values in its inputs and
// variables, checks planned == measured, and returns its outputs.
func runStep(t *testing.T, host *cpu.Target, p *compile.Program, seed uint64, inputs, vars, outs []string) map[string][]float64 {
	t.Helper()
	e := runtime.NewEngine(host, 0)
	defer e.Close()
	ex, err := e.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	rng := rand.New(rand.NewPCG(3, seed))
	fill := func(tt tensor.Tensor, scale float64) {
		for i := 0; i < tt.Shape().Size(); i++ {
			tt.SetFloat64At(i, rng.NormFloat64()*scale)
		}
	}
	for _, name := range vars {
		v, ok := e.Variable(name)
		if !ok {
			t.Fatalf("no variable %q", name)
		}
		fill(v.Tensor(), 1)
	}
	for _, name := range inputs {
		in, err := ex.Input(name)
		if err != nil {
			t.Fatal(err)
		}
		fill(in, 1)
	}
	if err := ex.Run(); err != nil {
		t.Fatal(err)
	}
	if planned, measured := p.Plan.Peak, e.Ledger().Peak(); planned != measured {
		t.Errorf("planned %d bytes, measured %d", planned, measured)
	}
	out := map[string][]float64{}
	for _, name := range outs {
		o, err := ex.Output(name)
		if err != nil {
			t.Fatal(err)
		}
		vals := make([]float64, o.Shape().Size())
		for i := range vals {
			vals[i] = o.Float64At(i)
		}
		out[name] = vals
	}
	return out
}
