package compile_test

import (
	"github.com/headroom-ml/headroom/backend/cpu"
	"testing"

	"github.com/headroom-ml/headroom/autodiff"
	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

// poolReluStep is a convolution, relu and 2x2 max pool, and the gradient
// of the pooled sum with respect to the filter: autodiff writes
// ReluGrad(y, MaxPool2DGrad(y, dp)), y the relu's output, read by the
// filter's gradient.
func poolReluStep() (*graph.Graph, compile.Options) {
	g := graph.New()
	x := g.Input("x", tensor.Float32, tensor.Shape{2, 8, 8, 3})
	w := g.Param("w", tensor.Float32, tensor.Shape{3, 3, 3, 16})
	y := graph.Relu(graph.Conv2D(x, w, [2]int{1, 1}, false))
	p := graph.MaxPool2D(y, [2]int{2, 2}, [2]int{2, 2}, false)
	loss := graph.ReduceSum(p, 0, 1, 2, 3)
	dw := autodiff.Grad(loss, w)[0]
	return g, compile.Options{Target: cpu.New(0), Outputs: []compile.Output{{Name: "loss", Node: loss}, {Name: "dw", Node: dw, Grad: true}}}
}

// TestPoolReluGradFuses: the relu's gradient after the pool's runs as one
// max_pool2d_grad instruction with ReluMask, reading the relu's output (the
// pool's input) and the pooled gradient; without fusion the two stay apart.
func TestPoolReluGradFuses(t *testing.T) {
	p, err := compile.Build(poolReluStep)
	if err != nil {
		t.Fatal(err)
	}
	var pool, grads, reluGrads []int
	for i, in := range p.Instrs {
		switch {
		case in.Op == graph.OpMaxPool2D:
			pool = append(pool, i)
		case in.Op == graph.OpMaxPool2DGrad:
			grads = append(grads, i)
		case in.Op == graph.OpReluGrad:
			reluGrads = append(reluGrads, i)
		}
	}
	if len(pool) != 1 || len(grads) != 1 || len(reluGrads) != 0 {
		t.Fatalf("program %v: want one max_pool2d, one max_pool2d_grad and no relu_grad", instrs(p))
	}
	fused := p.Instrs[grads[0]]
	if !fused.Window.ReluMask {
		t.Errorf("max_pool2d_grad has ReluMask false, want true")
	}
	if got, want := fused.In[0], p.Instrs[pool[0]].In[0]; got != want {
		t.Errorf("max_pool2d_grad reads buffer %d as x, want %d (the pool's input)", got, want)
	}
	if got, want := fused.Shape, (tensor.Shape{2, 6, 6, 16}); !tensor.Shape(got).Equal(want) {
		t.Errorf("max_pool2d_grad shape %v, want %v", got, want)
	}

	p2, err := compile.Build(func() (*graph.Graph, compile.Options) {
		g, opt := poolReluStep()
		opt.DisableFusion = true
		return g, opt
	})
	if err != nil {
		t.Fatal(err)
	}
	relu, masked := 0, 0
	for _, in := range p2.Instrs {
		if in.Op == graph.OpReluGrad {
			relu++
		}
		if in.Window != nil && in.Window.ReluMask {
			masked++
		}
	}
	if relu != 1 || masked != 0 {
		t.Errorf("without fusion: %d relu_grad and %d masked pool gradients, want 1 and 0", relu, masked)
	}
}
