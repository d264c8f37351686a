package train_test

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/headroom-ml/headroom/data"
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/tensor"
	"github.com/headroom-ml/headroom/train"
)

// examplesDataset streams an in-memory data set as the CLI streams files.
func examplesDataset(t *testing.T, e *data.Examples, batch int) data.Dataset[data.Batch] {
	t.Helper()
	x := tensor.New(tensor.Float32, append(tensor.Shape{e.N}, e.Shape...))
	copy(x.Float32s(), e.Floats)
	y := tensor.New(tensor.Int32, tensor.Shape{e.N})
	copy(y.Int32s(), e.Labels)
	ds, err := data.FromTensors(x, y)
	if err != nil {
		t.Fatal(err)
	}
	return data.Batches(ds, batch, false)
}

// predict returns the outputs of a predictor of cfg on e, in order.
func predict(t *testing.T, cfg train.PredictConfig, e *data.Examples) []float64 {
	t.Helper()
	p, err := train.NewPredictor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var out []float64
	err = p.Predict(context.Background(), examplesDataset(t, e, cfg.Batch), func(o tensor.Tensor) error {
		for i := 0; i < o.Len(); i++ {
			out = append(out, o.Float64At(i))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A saved model loads alone and predicts what the trainer predicts; its
// evaluation matches the trainer's; micro-batches change nothing but the
// plan.
func TestModelFilePredictEvaluate(t *testing.T) {
	trainSet, test := blobs(1, 600, 8, 4), blobs(1, 203, 8, 4)
	model := &nn.Sequential{Name: "m", InputShape: tensor.Shape{8}, Layers: []nn.Layer{
		&nn.Dense{LayerName: "dense", Units: 32, Activation: "relu"},
		&nn.BatchNormalization{LayerName: "bn"},
		&nn.Dropout{LayerName: "dropout", Rate: 0.1},
		&nn.Dense{LayerName: "dense_1", Units: 4, Activation: "softmax"},
	}}
	tr, _ := fitOn(t, train.Config{Model: model, Epochs: 2, Batch: 32, Seed: 3, NoWatchdog: true}, train.InMemory(trainSet, test))
	defer tr.Close()
	want := predict(t, train.PredictConfig{Model: model, Weights: tr.Weight, Batch: 32}, test)
	wantLoss, wantAcc, err := tr.Evaluate(test)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "m.safetensors")
	pre := data.Preprocessing{Format: "csv", ClassNames: []string{"a", "b", "c", "d"}, Columns: []string{"x"}}
	if err := tr.SaveModel(path, pre, nil); err != nil {
		t.Fatal(err)
	}
	mf, err := train.LoadModel(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := mf.Preprocessing.ClassNames; len(got) != 4 || got[3] != "d" || mf.Loss == nil || mf.Loss.Name() != "sparse_categorical_crossentropy" {
		t.Errorf("loaded preprocessing %+v, loss %v", mf.Preprocessing, mf.Loss)
	}
	for name := range mf.Weights {
		if strings.Contains(name, "/m") && !strings.Contains(name, "moving") || strings.HasPrefix(name, "opt") {
			t.Errorf("the model file holds %q: optimizer state belongs in checkpoints", name)
		}
	}
	for _, micro := range []int{0, 7} {
		p, err := train.NewPredictor(train.PredictConfig{Model: mf.Model, Weights: mf.Weight, Batch: 32, MicroBatch: micro})
		if err != nil {
			t.Fatal(err)
		}
		var got []float64
		err = p.Predict(context.Background(), examplesDataset(t, test, 32), func(out tensor.Tensor) error {
			for i := 0; i < out.Len(); i++ {
				got = append(got, out.Float64At(i))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("micro-batch %d: %d outputs, want %d", micro, len(got), len(want))
		}
		for i := range got {
			if math.Abs(got[i]-want[i]) > 1e-6 {
				t.Fatalf("micro-batch %d: output %d is %v, the trainer's %v", micro, i, got[i], want[i])
			}
		}
		if p.Planned <= 0 || p.Engine().Ledger().Peak() != p.Planned {
			t.Errorf("micro-batch %d: planned %d, measured peak %d", micro, p.Planned, p.Engine().Ledger().Peak())
		}
		if p.PlannedTotals[2] != 0 { // optstate
			t.Errorf("the inference plan holds optimizer state: %v", p.PlannedTotals)
		}
		p.Close()

		e, err := train.NewPredictor(train.PredictConfig{Model: mf.Model, Weights: mf.Weight, Batch: 32, MicroBatch: micro, Evaluate: true, Loss: mf.Loss})
		if err != nil {
			t.Fatal(err)
		}
		loss, acc, n, err := e.Evaluate(context.Background(), examplesDataset(t, test, 32), 4)
		e.Close()
		if err != nil || n != test.N || math.Abs(loss-wantLoss) > 1e-5 || acc != wantAcc {
			t.Errorf("micro-batch %d: evaluate: loss %v, accuracy %v over %d (%v); the trainer's %v, %v over %d", micro, loss, acc, n, err, wantLoss, wantAcc, test.N)
		}
	}

	// the weights load into a new trainer (Keras' load_weights)
	tr2, err := train.New(train.Config{Model: mf.Model, Epochs: 1, Batch: 32, Seed: 9, NoWatchdog: true}, train.InMemory(trainSet, test))
	if err != nil {
		t.Fatal(err)
	}
	defer tr2.Close()
	if err := tr2.LoadWeights(path); err != nil {
		t.Fatal(err)
	}
	if l, a, err := tr2.Evaluate(test); err != nil || math.Abs(l-wantLoss) > 1e-6 || a != wantAcc {
		t.Errorf("after LoadWeights: loss %v accuracy %v (%v), want %v %v", l, a, err, wantLoss, wantAcc)
	}
}

func TestLoadModelErrors(t *testing.T) {
	trainSet := blobs(1, 64, 8, 4)
	tr, _ := fit(t, train.Config{Model: mlp(), Epochs: 1, Batch: 32, Seed: 3, NoWatchdog: true}, trainSet)
	defer tr.Close()
	dir := t.TempDir()
	ckpt, err := tr.SaveCheckpoint(dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := train.LoadModel(ckpt); err == nil || !strings.Contains(err.Error(), "not a headroom model file") {
		t.Errorf("a checkpoint: %v, want an error saying it is not a model file", err)
	}
	garbage := filepath.Join(dir, "g.safetensors")
	os.WriteFile(garbage, []byte("not safetensors at all"), 0o644)
	if _, err := train.LoadModel(garbage); err == nil || !strings.Contains(err.Error(), garbage) {
		t.Errorf("garbage: %v, want an error naming the file", err)
	}
	// a model file whose architecture needs a weight it lacks
	path := filepath.Join(dir, "m.safetensors")
	if err := tr.SaveModel(path, data.Preprocessing{}, nil); err != nil {
		t.Fatal(err)
	}
	mf, err := train.LoadModel(path)
	if err != nil {
		t.Fatal(err)
	}
	delete(mf.Weights, "dense_1/bias")
	if _, err := train.NewPredictor(train.PredictConfig{Model: mf.Model, Weights: mf.Weight, Batch: 8}); err == nil || !strings.Contains(err.Error(), "dense_1/bias") {
		t.Errorf("a missing weight: %v, want an error naming it", err)
	}
	// a ModelFunc cannot be written as JSON, unless it is a registered model
	fn := &nn.ModelFunc{In: []nn.Input{{Name: "x", Shape: tensor.Shape{8}}}, Fn: func(c *nn.Context, xs []*graph.Node) []*graph.Node { return []*graph.Node{mlp().Forward(c, xs[0])} }}
	tf, _ := fit(t, train.Config{Model: fn, Epochs: 1, Batch: 32, Seed: 3, NoWatchdog: true}, trainSet)
	defer tf.Close()
	if err := tf.SaveModel(path, data.Preprocessing{}, nil); err == nil || !strings.Contains(err.Error(), "ModelFunc") {
		t.Errorf("saving a ModelFunc: %v, want an error naming ModelFunc", err)
	}
}
