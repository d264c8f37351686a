package cpu_test

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/headroom-ml/headroom/backend/cpu"
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/runtime"
	"github.com/headroom-ml/headroom/step"
	"github.com/headroom-ml/headroom/tensor"
)

// TestVisionStepAllocatesNothing: a training step through every vision op
// (grouped, dilated and depthwise convolutions, a transposed convolution,
// bilinear and nearest upsampling, padding, cropping, batch
// normalization, the activation ops) runs on two threads without a Go
// allocation after warm-up, and its loss is finite.
func TestVisionStepAllocatesNothing(t *testing.T) {
	six := 6.0
	x := nn.NewInput("x", tensor.Shape{12, 12, 3})
	h := nn.Apply(&nn.Conv2D{LayerName: "c1", Filters: 8, Kernel: [2]int{3, 3}, Same: true, Groups: 1}, x)
	h = nn.Apply(&nn.BatchNormalization{LayerName: "bn1"}, h)
	h = nn.Apply(&nn.ReLU{LayerName: "relu6", MaxValue: &six}, h)
	h = nn.Apply(&nn.DepthwiseConv2D{LayerName: "dw", Kernel: [2]int{3, 3}, Same: true, DepthMultiplier: 2, Activation: "silu"}, h)
	h = nn.Apply(&nn.Conv2D{LayerName: "grouped", Filters: 8, Kernel: [2]int{3, 3}, Same: true, Groups: 4, Activation: "hard_swish"}, h)
	h = nn.Apply(&nn.Conv2D{LayerName: "dilated", Filters: 8, Kernel: [2]int{3, 3}, Same: true, DilationRate: [2]int{2, 2}, Activation: "elu"}, h)
	h = nn.Apply(&nn.Pool2D{LayerName: "pool", Max: true, Pool: [2]int{2, 2}}, h)
	h = nn.Apply(&nn.Conv2DTranspose{LayerName: "up", Filters: 4, Kernel: [2]int{3, 3}, Strides: [2]int{2, 2}, Same: true, Activation: "softplus"}, h)
	h = nn.Apply(&nn.ZeroPadding2D{LayerName: "pad", Padding: [2][2]int{{1, 1}, {1, 1}}}, h)
	h = nn.Apply(&nn.Cropping2D{LayerName: "crop", Cropping: [2][2]int{{1, 1}, {1, 1}}}, h)
	h = nn.Apply(&nn.UpSampling2D{LayerName: "bilinear", Interpolation: "bilinear"}, h)
	h = nn.Apply(&nn.Pool2D{LayerName: "pool2", Pool: [2]int{2, 2}}, h)
	h = nn.Apply(&nn.UpSampling2D{LayerName: "nearest"}, h)
	h = nn.Apply(&nn.SeparableConv2D{LayerName: "sep", Filters: 4, Kernel: [2]int{3, 3}, Strides: [2]int{2, 2}, Same: true, Activation: "softsign"}, h)
	h = nn.Apply(&nn.GlobalMaxPooling2D{LayerName: "gmp"}, h)
	y := nn.Apply(&nn.Dense{LayerName: "out", Units: 5}, h)
	m, err := nn.NewFunctional("vision", []*nn.Tensor{x}, []*nn.Tensor{y})
	if err != nil {
		t.Fatal(err)
	}
	host := cpu.New(2)
	defer host.Close()
	p, err := step.Compile(step.Config{Model: m, Target: host}, 6, step.Train, (*step.Builder).Standard)
	if err != nil {
		t.Fatal(err)
	}
	e := runtime.NewEngine(host, 0)
	defer e.Close()
	ex, err := e.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	rng := rand.New(rand.NewPCG(1, 1))
	for _, v := range p.Variables { // the weights (optimizer state starts at zero)
		vt, _ := e.Variable(v.Name)
		if v.Node.Attr().Role != graph.RoleParam || strings.Contains(v.Name, "moving_") {
			continue
		}
		f := vt.Tensor().Float32s()
		for i := range f {
			f[i] = float32(rng.NormFloat64() * 0.3)
		}
	}
	in, _ := ex.Input("x")
	for i, f := 0, in.Float32s(); i < len(f); i++ {
		f[i] = float32(rng.NormFloat64())
	}
	lab, _ := ex.Input("y")
	for i, l := 0, lab.Int32s(); i < len(l); i++ {
		l[i] = int32(i % 5)
	}
	for i := 0; i < 2; i++ {
		if err := ex.Run(); err != nil {
			t.Fatal(err)
		}
	}
	if allocs := testing.AllocsPerRun(5, func() {
		if err := ex.Run(); err != nil {
			t.Fatal(err)
		}
	}); allocs != 0 {
		t.Errorf("AllocsPerRun(step) = %v, want 0", allocs)
	}
	loss, _ := ex.Output("loss")
	if l := loss.Float64At(0); !(l > 0 && l < 100) {
		t.Errorf("loss %v, want a finite positive value", l)
	}
}
