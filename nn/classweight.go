package nn

import (
	"fmt"

	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

// ClassWeighted multiplies each example's loss by the weight of its class,
// as Keras' fit(class_weight=...): loss_i · Weights[label_i]. The step
// still averages over the batch size (Keras' sum_over_batch_size), not over
// the weights. Loss must take one int32 class label per example (sparse
// categorical cross-entropy).
type ClassWeighted struct {
	Loss    Loss
	Weights []float64 // per class
}

func (w ClassWeighted) Name() string            { return w.Loss.Name() }
func (w ClassWeighted) LabelType() tensor.DType { return w.Loss.LabelType() }
func (w ClassWeighted) LabelShape(out tensor.Shape) tensor.Shape {
	return w.Loss.LabelShape(out)
}

// Unweighted returns the loss without class weights.
func (w ClassWeighted) Unweighted() Loss { return w.Loss }

// PerExample returns Loss's per-example loss [B] times the class weight of
// each example's label (labels: int32 [B]).
func (w ClassWeighted) PerExample(out, labels *graph.Node) *graph.Node {
	l := w.Loss.PerExample(out, labels)
	if labels.DType() != tensor.Int32 || labels.Shape().Rank() != 1 {
		panic(&graph.Error{Op: graph.OpGather, Owner: "loss", Msg: fmt.Sprintf("class weights need one int32 class label per example, got %s%v", labels.DType(), labels.Shape())})
	}
	t := tensor.New(l.DType(), tensor.Shape{len(w.Weights)})
	for i, v := range w.Weights {
		t.SetFloat64At(i, v)
	}
	// weights [C] gathered by labels [B] -> [B]
	return graph.Mul(l, graph.Gather(l.Graph().Constant(t), labels))
}

// BalancedClassWeights returns n / (classes · count(c)) for each class c
// of labels (scikit-learn's compute_class_weight("balanced"), which Keras
// users pass as class_weight); a class without examples gets weight 1.
func BalancedClassWeights(labels []int32, classes int) []float64 {
	count := make([]int, classes)
	for _, l := range labels {
		if l >= 0 && int(l) < classes {
			count[l]++
		}
	}
	w := make([]float64, classes)
	for c, k := range count {
		w[c] = 1
		if k > 0 {
			w[c] = float64(len(labels)) / float64(classes*k)
		}
	}
	return w
}
