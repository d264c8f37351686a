package nn

import (
	"fmt"

	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

// OutputLoss is the loss of one model output (its index among the model's
// outputs) and its weight in the total loss (0: 1), as Keras'
// compile(loss=[...], loss_weights=[...]) pairs them.
type OutputLoss struct {
	Output int
	Loss   Loss
	Weight float64
}

// Loss turns a model's output and the labels into one loss per example;
// the step averages them over the batch (Keras' sum_over_batch_size).
type Loss interface {
	Name() string
	// LabelType is the dtype of the labels input.
	LabelType() tensor.DType
	// LabelShape is one example's label shape for a model output of shape
	// out (batch first).
	LabelShape(out tensor.Shape) tensor.Shape
	// PerExample returns the loss of each example, [batch].
	PerExample(out, labels *graph.Node) *graph.Node
}

// LossByName returns "sparse_categorical_crossentropy", "binary_crossentropy",
// "mse" (also "mean_squared_error") or "mae" (also "mean_absolute_error").
func LossByName(name string) (Loss, error) {
	switch name {
	case "sparse_categorical_crossentropy", "sparse_softmax_cross_entropy":
		return SparseCategoricalCrossentropy{}, nil
	case "binary_crossentropy":
		return BinaryCrossentropy{}, nil
	case "mse", "mean_squared_error":
		return MeanSquaredError{}, nil
	case "mae", "mean_absolute_error":
		return MeanAbsoluteError{}, nil
	}
	return nil, fmt.Errorf("nn: unknown loss %q (known: sparse_categorical_crossentropy, binary_crossentropy, mse, mae)", name)
}

// SparseCategoricalCrossentropy takes int32 class labels. From logits it is
// the fused SoftmaxCrossEntropy; a softmax output is read through its logits.
type SparseCategoricalCrossentropy struct {
	// IgnoreNegative leaves the positions whose label is negative out (the
	// padding of sequences batched to a longer length): they add nothing to
	// the loss or the gradients, and the loss is the mean over the other
	// positions of the batch, as Keras' ignore_class and PyTorch's
	// ignore_index with a mean reduction. Each example's loss is then its
	// positions' sum scaled by batch/positions kept, so that the step's mean
	// over the batch is the mean over the positions kept.
	IgnoreNegative bool
}

func (SparseCategoricalCrossentropy) Name() string            { return "sparse_categorical_crossentropy" }
func (SparseCategoricalCrossentropy) LabelType() tensor.DType { return tensor.Int32 }
func (SparseCategoricalCrossentropy) LabelShape(out tensor.Shape) tensor.Shape {
	return out[1 : out.Rank()-1].Clone()
}
func (l SparseCategoricalCrossentropy) PerExample(out, labels *graph.Node) *graph.Node {
	logits, _ := Logits(out)
	if logits.Op() == graph.OpSoftmax || out.Op() == graph.OpSigmoid {
		logits = out // a sigmoid output is not a class distribution: use it as scores
	}
	if !l.IgnoreNegative {
		return meanRest(graph.SoftmaxCrossEntropy(logits, labels))
	}
	zero := graph.ScalarLike(labels, 0)
	keep := graph.GreaterEqual(labels, zero)
	ce := graph.SoftmaxCrossEntropy(logits, graph.Where(keep, labels, zero))
	valid := graph.Cast(keep, ce.DType())
	kept := graph.ReduceSum(valid) // positions kept in the batch
	per := graph.Mul(ce, valid)
	if per.Shape().Rank() > 1 {
		axes := make([]int, per.Shape().Rank()-1)
		for i := range axes {
			axes[i] = i + 1
		}
		per = graph.ReduceSum(per, axes...)
	}
	scale := graph.Div(graph.ScalarLike(kept, float64(per.Shape()[0])), graph.Maximum(kept, graph.ScalarLike(kept, 1)))
	return graph.Mul(per, scale)
}

// BinaryCrossentropy takes float labels in [0, 1] of the output's shape. A
// sigmoid output is read through its logits, with the stable form
// max(x, 0) - x·y + log(1 + exp(-|x|)); other outputs are treated as logits.
type BinaryCrossentropy struct{}

func (BinaryCrossentropy) Name() string                             { return "binary_crossentropy" }
func (BinaryCrossentropy) LabelType() tensor.DType                  { return tensor.Float32 }
func (BinaryCrossentropy) LabelShape(out tensor.Shape) tensor.Shape { return out[1:].Clone() }
func (BinaryCrossentropy) PerExample(out, labels *graph.Node) *graph.Node {
	x, _ := Logits(out)
	if labels.DType() != x.DType() {
		labels = graph.Cast(labels, x.DType())
	}
	zero := graph.ScalarLike(x, 0)
	l := graph.Add(graph.Sub(graph.Maximum(x, zero), graph.Mul(x, labels)),
		graph.Log(graph.AddScalar(graph.Exp(graph.Neg(graph.Abs(x))), 1)))
	return meanRest(l)
}

// MeanSquaredError averages (out - labels)² over each example.
type MeanSquaredError struct{}

func (MeanSquaredError) Name() string                             { return "mse" }
func (MeanSquaredError) LabelType() tensor.DType                  { return tensor.Float32 }
func (MeanSquaredError) LabelShape(out tensor.Shape) tensor.Shape { return out[1:].Clone() }
func (MeanSquaredError) PerExample(out, labels *graph.Node) *graph.Node {
	if labels.DType() != out.DType() {
		labels = graph.Cast(labels, out.DType())
	}
	return meanRest(graph.Square(graph.Sub(out, labels)))
}

// MeanAbsoluteError averages |out - labels| over each example (Keras'
// mean_absolute_error; its gradient at 0 is taken as +1, as graph.Abs's).
type MeanAbsoluteError struct{}

func (MeanAbsoluteError) Name() string                             { return "mae" }
func (MeanAbsoluteError) LabelType() tensor.DType                  { return tensor.Float32 }
func (MeanAbsoluteError) LabelShape(out tensor.Shape) tensor.Shape { return out[1:].Clone() }
func (MeanAbsoluteError) PerExample(out, labels *graph.Node) *graph.Node {
	if labels.DType() != out.DType() {
		labels = graph.Cast(labels, out.DType())
	}
	return meanRest(graph.Abs(graph.Sub(out, labels)))
}

// meanRest averages x [batch, ...] over every axis but the first.
func meanRest(x *graph.Node) *graph.Node {
	if x.Shape().Rank() == 1 {
		return x
	}
	axes := make([]int, x.Shape().Rank()-1)
	for i := range axes {
		axes[i] = i + 1
	}
	return graph.ReduceMean(x, axes...)
}
