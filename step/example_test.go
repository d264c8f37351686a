package step_test

import (
	"fmt"
	"math/rand/v2"

	"github.com/headroom-ml/headroom/backend/cpu"
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/optim"
	"github.com/headroom-ml/headroom/runtime"
	"github.com/headroom-ml/headroom/step"
	"github.com/headroom-ml/headroom/tensor"
)

// A custom training step, as with tf.GradientTape: the loss is the user's
// own (mean absolute error against a target input it declares), written
// over the model's output with graph ops; Minimize adds the backward pass
// and Adam's update, and the whole step is planned and compiled as one.
func Example_customStep() {
	model := &nn.Sequential{InputShape: tensor.Shape{4}, Layers: []nn.Layer{
		&nn.Dense{LayerName: "hidden", Units: 16, Activation: "tanh"},
		&nn.Dense{LayerName: "out", Units: 1},
	}}
	cfg := step.Config{Model: model, Optimizer: &optim.Adam{}, Target: cpu.New(1)}
	const batch = 32
	var init map[string]nn.Initializer
	prog, err := step.Compile(cfg, batch, step.Train, func(b *step.Builder) {
		target := b.G.Input("target", tensor.Float32, tensor.Shape{batch, 1})
		loss := graph.ReduceMean(graph.Abs(graph.Sub(b.Outputs[0], target)))
		b.Minimize(loss)
		b.Output("loss", loss)
		init = b.Ctx.Init // the weights' initializers (Keras' defaults)
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	engine := runtime.NewEngine(cfg.Target.(runtime.Backend), 0)
	defer engine.Close()
	run, err := engine.Load(prog)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer run.Close()
	for name, in := range init {
		if v, ok := engine.Variable(name); ok {
			nn.InitTensor(in, 7, name, v.Tensor())
		}
	}
	x, _ := run.Input("x")
	y, _ := run.Input("target")
	rng := rand.New(rand.NewPCG(1, 2))
	for i, f := 0, x.Float32s(); i < len(f); i++ {
		f[i] = float32(rng.NormFloat64())
	}
	for r, t := 0, y.Float32s(); r < batch; r++ { // the target: the sum of the features
		t[r] = x.Float32s()[4*r] + x.Float32s()[4*r+1] + x.Float32s()[4*r+2] + x.Float32s()[4*r+3]
	}
	loss, _ := run.Output("loss")
	for s := int64(1); s <= 20; s++ {
		cfg.Optimizer.Feed(s, 0.05, run.SetScalar) // the learning rate and Adam's bias corrections
		if err := run.Run(); err != nil {
			fmt.Println(err)
			return
		}
		if s%5 == 0 || s == 1 {
			fmt.Printf("step %2d: loss %.2f\n", s, loss.Float64At(0))
		}
	}
	// Output:
	// step  1: loss 1.38
	// step  5: loss 0.32
	// step 10: loss 0.35
	// step 15: loss 0.18
	// step 20: loss 0.17
}
