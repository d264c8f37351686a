package profile

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/headroom-ml/headroom/backend/cpu"
	"github.com/headroom-ml/headroom/data"

	"github.com/headroom-ml/headroom/autodiff"
	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/tensor"
	"github.com/headroom-ml/headroom/train"
)

// dense adds x·w + b in scope name: x [B, D] -> [B, out].
func dense(g *graph.Graph, name string, x *graph.Node, out int) *graph.Node {
	g.PushScope(name)
	defer g.PopScope()
	w := g.Param(name+"/w", tensor.Float32, tensor.Shape{x.Shape()[1], out})
	b := g.Param(name+"/b", tensor.Float32, tensor.Shape{out})
	return graph.Add(graph.MatMul(x, w), b)
}

// mlpProgram compiles a training step of x [64, 784] -> dense1 256 relu ->
// dense2 10, softmax cross-entropy, with autodiff and SGD as graph ops.
func mlpProgram(t testing.TB) *compile.Program {
	t.Helper()
	p, err := compile.Build(func() (*graph.Graph, compile.Options) {
		g := graph.New()
		x := g.Input("x", tensor.Float32, tensor.Shape{64, 784})
		y := g.Input("y", tensor.Int32, tensor.Shape{64})
		h := graph.Relu(dense(g, "dense1", x, 256))
		loss := graph.ReduceMean(graph.SoftmaxCrossEntropy(dense(g, "dense2", h, 10), y))
		params := g.Variables()
		grads := autodiff.Grad(loss, params...)
		g.SetPhase(graph.Update)
		g.PushScope("sgd")
		for i, p := range params {
			graph.Assign(p, graph.Sub(p, graph.MulScalar(grads[i], 0.1)))
		}
		g.PopScope()
		return g, compile.Options{Target: cpu.New(0), Name: "mlp", Grads: grads, Outputs: []compile.Output{{Name: "loss", Node: loss}}}
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// cnnLayers are the layers of nn's reference CNN.
var cnnLayers = []string{"conv2d", "conv2d_1", "max_pooling2d", "dense", "dense_1"}

// cnnPlan returns the training step's plan of the reference CNN for 8x8
// digits in batches of 32, with Adam, as `headroom plan --model cnn` sees it.
func cnnPlan(t testing.TB) *compile.Plan {
	t.Helper()
	m, err := nn.ModelByName("cnn", tensor.Shape{8, 8, 1}, 10)
	if err != nil {
		t.Fatal(err)
	}
	info := data.SetInfo{Train: &data.Examples{Name: "digits", Shape: tensor.Shape{8, 8, 1}, N: 256, Classes: 10}, Labels: data.LabelKind{Class: true, Classes: 10}}
	rp, err := train.PlanFor(train.Config{Model: m, Batch: 32}, train.Described(info))
	if err != nil {
		t.Fatal(err)
	}
	return rp.Step
}

// gapPlan is a hand-made plan whose arena (1408 B) is larger than its lower
// bound (896 B, at instruction 2), as a planner that fragments would make:
//
//	instr   0    1    2    3
//	b1      [---activation 256 @0----]          live [0,2]
//	b2           [ws 512 @256]                   live [1,1]
//	b3                [----ws 640 @768----]      live [2,3]
//
// Totals follow compile's rules: activation live at the peak instruction,
// the rest of the arena workspace.
func gapPlan(t testing.TB) *compile.Plan {
	t.Helper()
	p := &compile.Plan{
		Instrs: 4,
		Buffers: []compile.Buffer{
			{ID: 0, Kind: compile.KindVariable, Category: mem.Param, Name: "w", Owner: "dense/w", Site: "model.go:10", DType: tensor.Float32, Shape: tensor.Shape{256}, Bytes: 1024, Offset: -1},
			{ID: 1, Kind: compile.KindArena, Category: mem.Activation, Owner: "dense/matmul", Site: "model.go:11", DType: tensor.Float32, Shape: tensor.Shape{64}, Bytes: 256, Offset: 0, Start: 0, End: 2},
			{ID: 2, Kind: compile.KindArena, Category: mem.Workspace, Owner: "dense/add", Site: "model.go:12", DType: tensor.Float32, Shape: tensor.Shape{128}, Bytes: 512, Offset: 256, Start: 1, End: 1},
			{ID: 3, Kind: compile.KindArena, Category: mem.Workspace, Owner: "grad/dense/matmul/matmul", Site: "model.go:20", DType: tensor.Float32, Shape: tensor.Shape{160}, Bytes: 640, Offset: 768, Start: 2, End: 3},
		},
		ArenaBytes: 1408,
		LowerBound: 896,
		PeakInstr:  2,
		Peak:       1024 + 1408,
	}
	p.Totals[mem.Param] = 1024
	p.Totals[mem.Activation] = 256
	p.Totals[mem.Workspace] = 1408 - 256
	p.ArenaShare[mem.Activation] = 256
	p.ArenaShare[mem.Workspace] = 1408 - 256
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	return p
}

// testPlans are the plans every exporter is tested on.
func testPlans(t testing.TB) []struct {
	name string
	plan *compile.Plan
} {
	return []struct {
		name string
		plan *compile.Plan
	}{
		{"mlp", mlpProgram(t).Plan},
		{"cnn", cnnPlan(t)},
		{"gap", gapPlan(t)},
	}
}

// blobs returns n examples of 8 features in 4 Gaussian clusters.
func blobs(seed uint64, n int) *data.Examples {
	const d, c = 8, 4
	rng := rand.New(rand.NewPCG(seed, 1))
	centers := make([]float64, c*d)
	for i := range centers {
		centers[i] = rng.NormFloat64() * 2
	}
	e := &data.Examples{Name: "blobs", Shape: tensor.Shape{d}, N: n, Floats: make([]float32, n*d), Labels: make([]int32, n), Classes: c}
	for i := 0; i < n; i++ {
		k := rng.IntN(c)
		e.Labels[i] = int32(k)
		for j := 0; j < d; j++ {
			e.Floats[i*d+j] = float32(centers[k*d+j] + rng.NormFloat64())
		}
	}
	return e
}

// trainRun fits a small model for 3 epochs with the given callbacks and
// returns its training plan and history.
func trainRun(t testing.TB, callbacks ...train.Callback) (*train.Trainer, *Run) {
	t.Helper()
	model := &nn.Sequential{InputShape: tensor.Shape{8}, Layers: []nn.Layer{
		&nn.Dense{LayerName: "dense", Units: 32, Activation: "relu"},
		&nn.Dense{LayerName: "dense_1", Units: 4},
	}}
	data := blobs(1, 320)
	cfg := train.Config{Model: model, Epochs: 3, Batch: 64, Seed: 3, Callbacks: callbacks}
	tr, err := train.New(cfg, train.InMemory(data, blobs(1, 128)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.Close)
	h, err := tr.Fit(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	r := &Run{Steps: h.Steps, FirstLoss: h.FirstLoss, LastLoss: h.LastLoss, SamplesPerSec: h.SamplesPerSec,
		TrainSeconds: h.TrainSeconds, MeasuredPeak: h.MeasuredPeak, LedgerGrowth: h.LedgerGrowth, Growth: h.Growth}
	for _, e := range h.Epochs {
		r.Epochs = append(r.Epochs, Epoch{Epoch: e.Epoch, Loss: e.Loss, Accuracy: e.Accuracy, ValLoss: e.ValLoss, ValAccuracy: e.ValAccuracy})
	}
	return tr, r
}
