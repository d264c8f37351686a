package cli

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/headroom-ml/headroom/data"
	"github.com/headroom-ml/headroom/datasets"
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/tensor"
	"github.com/headroom-ml/headroom/train"
)

// pipelineBudget is the input pipeline's share of a streamed run: its
// shuffle buffer, its read-ahead and the batches in flight.
const pipelineBudget = 16 << 20

// streamed is a training set read from disk through the input pipeline
// while it trains, instead of being loaded (tf.data's answer to a data set
// that does not fit beside the plan).
type streamed struct {
	ds       data.Dataset[data.Batch]
	cfg      data.Config
	standIn  *data.Examples // the set's shape, classes and size; no data
	images   string
	dataSize int64 // what loading it would have held
}

// planStream decides, for Fashion-MNIST under a known budget, whether the
// training set is streamed: when the plan and the set held in memory would
// not fit but the plan, the test set and the pipeline do. It returns nil
// to load as usual.
func (o *options) planStream() (*streamed, error) {
	budget, _ := o.effectiveBudget()
	if budget <= 0 || (o.dataset != "fashion-mnist" && o.dataset != "fashion") || o.keras != "" {
		return nil, nil
	}
	dir := o.dataDir
	if dir == "" {
		dir = datasets.FashionMNISTDir
	}
	images := filepath.Join(dir, "train-images-idx3-ubyte.gz")
	shape, err := data.IDXShape(images)
	if err != nil || len(shape) != 3 {
		return nil, nil // the loader reports it
	}
	testShape, err := data.IDXShape(filepath.Join(dir, "t10k-images-idx3-ubyte.gz"))
	if err != nil || len(testShape) != 3 {
		return nil, nil
	}
	n, nTest := int(shape[0]), int(testShape[0])
	standIn := &data.Examples{Name: "fashion-mnist/train", Shape: tensor.Shape{28, 28, 1}, N: n, Classes: 10, Scale: 1.0 / 255}
	testIn := &data.Examples{Name: "fashion-mnist/test", Shape: standIn.Shape, N: nTest, Classes: 10}
	cfg, err := o.config(standIn, testIn)
	if err != nil {
		return nil, err
	}
	_, totals, err := train.PlanFor(cfg, n, nTest)
	if err != nil {
		return nil, err
	}
	var plan int64
	for _, b := range totals {
		plan += b
	}
	setBytes := mem.Align(int64(n) * (28*28 + 4))
	testBytes := mem.Align(int64(nTest) * (28*28 + 4))
	if plan+setBytes+testBytes <= budget || plan+testBytes+pipelineBudget > budget {
		return nil, nil // it fits, or streaming would not fit either
	}
	ds := data.Batches(data.IDX(images, filepath.Join(dir, "train-labels-idx1-ubyte.gz")).Shuffle(10000, o.seed), o.batch, false)
	return &streamed{ds: ds, cfg: data.Config{Name: "fashion-mnist stream"}, standIn: standIn,
		images: images, dataSize: setBytes}, nil
}

// scaled wraps m so that it takes raw pixels and scales them by scale
// first (the streamed batches carry the files' bytes; in memory the data
// set scales them as it feeds): the same numbers reach m.
func scaled(m nn.Model, scale float32) nn.Model {
	return &nn.ModelFunc{In: m.Inputs(), Fn: func(c *nn.Context, ins []*graph.Node) []*graph.Node {
		x := graph.Mul(ins[0], graph.ScalarLike(ins[0], float64(scale)))
		return m.Build(c, []*graph.Node{x})
	}}
}

// fit trains on the stream.
func (s *streamed) fit(t *train.Trainer) (*train.History, error) {
	return t.FitStream(context.Background(), s.ds, s.cfg)
}

func (s *streamed) describe() string {
	return fmt.Sprintf("the training set (%s in memory) does not fit beside the plan: it is streamed from %s through a %s pipeline (a shuffle buffer of 10,000 examples)",
		mem.FormatBytes(s.dataSize), s.images, mem.FormatBytes(pipelineBudget))
}
