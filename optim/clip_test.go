package optim_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/headroom-ml/headroom/backend/cpu"
	"github.com/headroom-ml/headroom/runtime"

	"github.com/headroom-ml/headroom/autodiff"
	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/internal/testutil"
	"github.com/headroom-ml/headroom/optim"
	"github.com/headroom-ml/headroom/tensor"
)

func globalNorm(g []float64) float64 {
	s := 0.0
	for _, v := range g {
		s += v * v
	}
	return math.Sqrt(s)
}

// clipRef is tf.clip_by_global_norm: g · clip / max(‖g‖, clip).
func clipRef(g []float64, clip float64) []float64 {
	scale := clip / math.Max(globalNorm(g), clip)
	out := make([]float64, len(g))
	for i, v := range g {
		out[i] = v * scale
	}
	return out
}

// clippedGrads compiles the quadratic problem's gradients at w0 through
// ClipByGlobalNorm(clip) and returns them, concatenated.
func clippedGrads(t *testing.T, clip float64) []float64 {
	t.Helper()
	p, err := compile.Build(func() (*graph.Graph, compile.Options) {
		g := graph.New()
		params := []*graph.Node{g.Param("w1", tensor.Float64, shapes[0]), g.Param("w2", tensor.Float64, shapes[1])}
		grads := optim.ClipByGlobalNorm(autodiff.Grad(quadratic(g, params), params...), clip)
		opt := compile.Options{Target: cpu.New(0), Name: "clip"}
		for i, gr := range grads {
			opt.Outputs = append(opt.Outputs, compile.Output{Name: fmt.Sprint("g", i), Node: gr, Grad: true})
		}
		return g, opt
	})
	if err != nil {
		t.Fatal(err)
	}
	e := runtime.NewEngine(cpu.New(0), 0)
	defer e.Close()
	x, err := e.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	ws := split(w0)
	for i, name := range []string{"w1", "w2"} {
		v, _ := e.Variable(name)
		copy(v.Tensor().Float64s(), ws[i])
	}
	if err := x.Run(); err != nil {
		t.Fatal(err)
	}
	var out []float64
	for i := range shapes {
		o, err := x.Output(fmt.Sprint("g", i))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, o.Float64s()...)
	}
	return out
}

func TestClipByGlobalNorm(t *testing.T) {
	g := gradOf(w0)
	norm := globalNorm(g)
	if norm < 1 {
		t.Fatalf("test problem's gradient norm %v is too small to clip meaningfully", norm)
	}
	tests := []struct {
		name      string
		clip      float64
		wantNorm  float64
		unchanged bool
	}{
		{"above/half", norm / 2, norm / 2, false},
		{"above/tenth", norm / 10, norm / 10, false},
		{"below", norm * 2, norm, true},
		{"far_below", norm * 1e6, norm, true},
		{"off", 0, norm, true},
		{"negative_is_off", -1, norm, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := clippedGrads(t, tc.clip)
			want := g
			if tc.clip > 0 {
				want = clipRef(g, tc.clip)
			}
			testutil.RequireClose(t, "clipped gradients", got, want, 1e-13, 1e-15)
			if n := globalNorm(got); math.Abs(n-tc.wantNorm) > 1e-12*tc.wantNorm {
				t.Errorf("norm of clipped gradients %v, want %v", n, tc.wantNorm)
			}
			if tc.unchanged {
				testutil.RequireClose(t, "unclipped gradients", got, g, 1e-14, 1e-15)
			}
			// clipping keeps each gradient's direction: the ratio is one scale
			ratio := got[0] / g[0]
			for i := range g {
				if r := got[i] / g[i]; math.Abs(r-ratio) > 1e-13 {
					t.Errorf("element %d scaled by %v, element 0 by %v: want one scale", i, r, ratio)
				}
			}
		})
	}
}

func TestClipByGlobalNormNoOp(t *testing.T) {
	if got := optim.ClipByGlobalNorm(nil, 1); got != nil {
		t.Errorf("ClipByGlobalNorm(nil) = %v, want nil", got)
	}
	g := graph.New()
	p := g.Param("w", tensor.Float64, tensor.Shape{2})
	grads := []*graph.Node{p}
	if got := optim.ClipByGlobalNorm(grads, 0); len(got) != 1 || got[0] != p {
		t.Errorf("ClipByGlobalNorm(clip 0) rewrote the gradients: %v", got)
	}
}

// A clipped SGD step, three times, against the reference: clip then step.
func TestClippedSGDSteps(t *testing.T) {
	const clip = 0.5
	w := append([]float64(nil), w0...)
	for _, lr := range lrs {
		g := clipRef(gradOf(w), clip)
		for i := range w {
			w[i] -= lr * g[i]
		}
	}
	s := newStepper(t, &optim.SGD{}, false, clip)
	for i, lr := range lrs {
		s.step(int64(i+1), lr)
	}
	testutil.RequireClose(t, "weights after 3 clipped steps", s.weights(), w, 1e-12, 1e-15)
}

// A zero gradient stays zero (no 0/0).
func TestClipByGlobalNormZero(t *testing.T) {
	p, err := compile.Build(func() (*graph.Graph, compile.Options) {
		g := graph.New()
		v := g.Param("g", tensor.Float64, tensor.Shape{4})
		out := optim.ClipByGlobalNorm([]*graph.Node{graph.AddScalar(v, 0)}, 1)[0]
		return g, compile.Options{Target: cpu.New(0), Name: "clip", Outputs: []compile.Output{{Name: "out", Node: out}}}
	})
	if err != nil {
		t.Fatal(err)
	}
	e := runtime.NewEngine(cpu.New(0), 0)
	defer e.Close()
	x, err := e.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if err := x.Run(); err != nil { // the variable starts at zero
		t.Fatal(err)
	}
	out, _ := x.Output("out")
	for i, v := range out.Float64s() {
		if v != 0 {
			t.Errorf("clipped zero gradient [%d] = %v, want 0", i, v)
		}
	}
}
