package onnx

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

// TestSequenceNodes: gelu is its erf formula in the order onnxruntime's
// GeluFusion matches; layer normalization is one LayerNormalization that
// lists its Mean and InvStdDev outputs only when a part is read; a causal
// attention without a mask adds a constant, one with a mask uses Where;
// an LSTM or GRU step is its composition, with a Concat of the activations
// only when they are read.
func TestSequenceNodes(t *testing.T) {
	cases := []struct {
		name  string
		build func(g *graph.Graph, x *graph.Node) []Output // x: [B, 4, 6]
		want  []string
		outs  int // outputs of the LayerNormalization node
	}{
		{"gelu", func(g *graph.Graph, x *graph.Node) []Output {
			return []Output{{"y", graph.Gelu(x)}}
		}, []string{"Div", "Erf", "Add", "Mul", "Mul", "Identity"}, 0},
		{"layer norm", func(g *graph.Graph, x *graph.Node) []Output {
			return []Output{{"y", layerNorm(g, x)}}
		}, []string{"LayerNormalization", "Identity"}, 1},
		{"layer norm and its 1/σ", func(g *graph.Graph, x *graph.Node) []Output {
			y := layerNorm(g, x)
			return []Output{{"y", y}, {"rstd", graph.PartOf(y, 2)}}
		}, []string{"LayerNormalization", "Squeeze", "Identity", "Identity"}, 3},
		{"causal attention", func(g *graph.Graph, x *graph.Node) []Output {
			h := graph.Reshape(x, x.Shape()[0], 4, 2, 3)
			return []Output{{"y", graph.Attention(h, h, h, graph.AttentionOptions{Causal: graph.CausalTopLeft})}}
		}, []string{"Reshape", "Transpose", "Transpose", "Transpose", "MatMul", "Mul", "Add", "Softmax", "MatMul", "Transpose", "Identity"}, 0},
		{"masked attention", func(g *graph.Graph, x *graph.Node) []Output {
			h := graph.Reshape(x, x.Shape()[0], 4, 2, 3)
			m := graph.Greater(graph.ReduceSum(x, 2), g.Scalar(0, tensor.Float32)) // [B, 4]
			m = graph.BroadcastTo(graph.Reshape(m, x.Shape()[0], 1, 4), x.Shape()[0], 4, 4)
			return []Output{{"y", graph.Attention(h, h, h, graph.AttentionOptions{Mask: m})}}
		}, []string{"Reshape", "ReduceSum", "Greater", "Reshape", "Expand", "Transpose", "Transpose", "Transpose", "MatMul", "Mul",
			"Unsqueeze", "Where", "Softmax", "Where", "MatMul", "Transpose", "Identity"}, 0},
		{"lstm step without a state", func(g *graph.Graph, x *graph.Node) []Output {
			return []Output{{"y", graph.LSTMCell(graph.Reshape(x, x.Shape()[0], 24), nil)}}
		}, []string{"Reshape", "Split", "Sigmoid", "Sigmoid", "Tanh", "Sigmoid", "Mul", "Tanh", "Mul", "Identity"}, 0},
		{"lstm steps, c and the activations", func(g *graph.Graph, x *graph.Node) []Output {
			z := graph.Reshape(x, x.Shape()[0], 24)
			h := graph.LSTMCell(z, nil)
			h2 := graph.LSTMCell(z, graph.PartOf(h, 1))
			return []Output{{"y", h2}, {"c", graph.PartOf(h2, 1)}, {"acts", graph.PartOf(h2, 2)}}
		}, []string{"Reshape", "Split", "Sigmoid", "Sigmoid", "Tanh", "Sigmoid", "Mul", "Tanh", "Mul",
			"Split", "Sigmoid", "Sigmoid", "Tanh", "Sigmoid", "Mul", "Mul", "Add", "Tanh", "Mul", "Concat",
			"Identity", "Identity", "Identity"}, 0},
		{"gru step of x alone", func(g *graph.Graph, x *graph.Node) []Output {
			return []Output{{"y", graph.GRUCell(graph.Reshape(x, x.Shape()[0], 24), nil, nil)}}
		}, []string{"Reshape", "Split", "Sigmoid", "Sigmoid", "Tanh", "Mul", "Sub", "Identity"}, 0},
		{"gru step of x and u", func(g *graph.Graph, x *graph.Node) []Output {
			z := graph.Reshape(x, x.Shape()[0], 24)
			return []Output{{"y", graph.GRUCell(z, graph.Neg(z), nil)}}
		}, []string{"Reshape", "Neg", "Split", "Split", "Add", "Sigmoid", "Add", "Sigmoid", "Mul", "Add", "Tanh",
			"Mul", "Sub", "Identity"}, 0},
		{"gru step of x and a broadcast row", func(g *graph.Graph, x *graph.Node) []Output {
			z := graph.Reshape(x, x.Shape()[0], 24)
			u := graph.BroadcastTo(g.Param("bu", tensor.Float32, tensor.Shape{24}), x.Shape()[0], 24)
			return []Output{{"y", graph.GRUCell(z, u, nil)}}
		}, []string{"Reshape", "Expand", "Split", "Split", "Add", "Sigmoid", "Add", "Sigmoid", "Mul", "Add", "Tanh",
			"Mul", "Sub", "Identity"}, 0},
		{"gru steps, a previous state and the activations", func(g *graph.Graph, x *graph.Node) []Output {
			z := graph.Reshape(x, x.Shape()[0], 24)
			h := graph.GRUCell(z, nil, nil)
			h2 := graph.GRUCell(z, z, h)
			return []Output{{"y", h2}, {"acts", graph.PartOf(h2, 1)}}
		}, []string{"Reshape", "Split", "Sigmoid", "Sigmoid", "Tanh", "Mul", "Sub",
			"Split", "Split", "Add", "Sigmoid", "Add", "Sigmoid", "Mul", "Add", "Tanh", "Sub", "Mul", "Add", "Concat",
			"Identity", "Identity"}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := graph.New()
			x := g.Input("x", tensor.Float32, tensor.Shape{3, 4, 6})
			outs := c.build(g, x)
			w := randomWeights(g, rand.New(rand.NewPCG(1, 1)))
			gp := written(t, Model{Graph: g, Inputs: []*graph.Node{x}, Outputs: outs, Weights: weightsOf(w)}, Options{}).sub(t, 7)
			if got := opTypes(t, gp); !slices.Equal(got, c.want) {
				t.Errorf("nodes %v, want %v", got, c.want)
			}
			for _, n := range gp.subs(t, 1) {
				if n.str(t, 4) == "LayerNormalization" {
					if got := len(n.strs(t, 2)); got != c.outs {
						t.Errorf("LayerNormalization has %d outputs, want %d", got, c.outs)
					}
				}
			}
		})
	}
}

func layerNorm(g *graph.Graph, x *graph.Node) *graph.Node {
	c := x.Shape()[x.Shape().Rank()-1]
	return graph.LayerNorm(x, g.Param("gamma", tensor.Float32, tensor.Shape{c}), g.Param("beta", tensor.Float32, tensor.Shape{c}), 1e-5)
}

// TestSequenceExportErrors: what the sequence ops refuse, by op and why.
func TestSequenceExportErrors(t *testing.T) {
	cases := []struct {
		name  string
		build func(g *graph.Graph, x *graph.Node) *graph.Node // x: [B, 4, 6]
		op    graph.Op
		want  string
	}{
		{"attention with dropout", func(g *graph.Graph, x *graph.Node) *graph.Node {
			h := graph.Reshape(x, 2, 4, 2, 3)
			return graph.Attention(h, h, h, graph.AttentionOptions{DropoutRate: 0.1, Step: g.Scalar(0, tensor.Int64)})
		}, graph.OpAttention, "attention with dropout (rate 0.1) is a training step's"},
		{"attention's log-sum-exp", func(g *graph.Graph, x *graph.Node) *graph.Node {
			h := graph.Reshape(x, 2, 4, 2, 3)
			return graph.AttentionLSE(graph.Attention(h, h, h, graph.AttentionOptions{}))
		}, graph.OpPart, "log-sum-exp of each row is what its backward pass keeps"},
		{"keys without the batch", func(g *graph.Graph, x *graph.Node) *graph.Node {
			h := graph.Reshape(x, 2, 4, 2, 3)
			k := g.Param("k", tensor.Float32, tensor.Shape{2, 5, 2, 3})
			return graph.Attention(h, k, k, graph.AttentionOptions{})
		}, graph.OpAttention, "do not scale alike"},
		{"layer norm over the batch", func(g *graph.Graph, x *graph.Node) *graph.Node {
			return layerNorm(g, graph.Transpose(x, 1, 2, 0))
		}, graph.OpLayerNorm, "normalizes over the batch axis 2"},
		{"lstm state without the batch", func(g *graph.Graph, x *graph.Node) *graph.Node {
			return graph.LSTMCell(graph.Reshape(x, 2, 24), g.Param("c0", tensor.Float32, tensor.Shape{2, 6}))
		}, graph.OpLSTMCell, "do not scale alike"},
		{"gru state without the batch", func(g *graph.Graph, x *graph.Node) *graph.Node {
			z := graph.Reshape(x, 2, 24)
			return graph.GRUCell(z, z, g.Param("h0", tensor.Float32, tensor.Shape{2, 8}))
		}, graph.OpGRUCell, "do not scale alike"},
		{"gru recurrent projection without the batch", func(g *graph.Graph, x *graph.Node) *graph.Node {
			return graph.GRUCell(graph.Reshape(x, 2, 24), g.Param("u", tensor.Float32, tensor.Shape{2, 24}), nil)
		}, graph.OpGRUCell, "do not scale alike"},
		{"gru step's gradient", func(g *graph.Graph, x *graph.Node) *graph.Node {
			h := graph.GRUCell(graph.Reshape(x, 2, 24), nil, nil)
			dx, _, _ := graph.GRUCellGrad(graph.PartOf(h, 1), h, nil)
			return dx
		}, graph.OpGRUCellGrad, "a training step's backward pass"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := graph.New()
			x := g.Input("x", tensor.Float32, tensor.Shape{2, 4, 6})
			y := c.build(g, x)
			w := randomWeights(g, rand.New(rand.NewPCG(1, 1)))
			var buf bytes.Buffer
			err := Write(&buf, Model{Graph: g, Inputs: []*graph.Node{x}, Outputs: []Output{{"y", y}}, Weights: weightsOf(w)}, Options{})
			var ue *UnsupportedError
			if !errors.As(err, &ue) || ue.Op != c.op || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want an *UnsupportedError for %s containing %q", err, c.op, c.want)
			}
		})
	}
}
