package autodiff_test

import (
	"hash/fnv"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/headroom-ml/headroom/backend/cpu"

	"github.com/headroom-ml/headroom/autodiff"
	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/internal/testutil"
	"github.com/headroom-ml/headroom/runtime"
	"github.com/headroom-ml/headroom/tensor"
)

// gradCase is one op (or short composition) under a gradient check. Each x
// is a float64 variable; build returns a node of any shape, and the checked
// loss is sum(out * R) for a fixed random R, so every output element gets a
// different weight.
type gradCase struct {
	name   string
	shapes []tensor.Shape
	build  func(g *graph.Graph, xs []*graph.Node) *graph.Node
	// init fills variable i; nil draws N(0,1).
	init func(rng *rand.Rand, i int, v []float64)
	eps  float64 // 0: 1e-6
}

func positive(rng *rand.Rand, _ int, v []float64) {
	for i := range v {
		v[i] = 0.5 + rng.Float64()*2
	}
}

// spaced draws distinct values at least 0.01 apart, so that no perturbation
// crosses a tie (Maximum, ReduceMax) or a kink (Relu).
func spaced(rng *rand.Rand, _ int, v []float64) {
	perm := rng.Perm(len(v))
	for i := range v {
		v[i] = float64(perm[i]-len(v)/2)*0.37 + 0.05 + rng.Float64()*0.01
	}
}

// grid draws values that float32 represents exactly (multiples of 1/64),
// for casts through float32 checked with a step float32 also represents.
func grid(rng *rand.Rand, _ int, v []float64) {
	for i := range v {
		v[i] = float64(rng.IntN(257)-128) / 64
	}
}

func unary(name string, f func(*graph.Node) *graph.Node, init func(*rand.Rand, int, []float64)) gradCase {
	return gradCase{name: name, shapes: []tensor.Shape{{3, 5}}, init: init,
		build: func(g *graph.Graph, x []*graph.Node) *graph.Node { return f(x[0]) }}
}

func binary(name string, f func(a, b *graph.Node) *graph.Node, sa, sb tensor.Shape, init func(*rand.Rand, int, []float64)) gradCase {
	return gradCase{name: name, shapes: []tensor.Shape{sa, sb}, init: init,
		build: func(g *graph.Graph, x []*graph.Node) *graph.Node { return f(x[0], x[1]) }}
}

func int32s(g *graph.Graph, shape tensor.Shape, v ...int32) *graph.Node {
	return g.Constant(tensor.FromSlice(shape, v))
}

func gradCases() []gradCase {
	divInit := func(rng *rand.Rand, i int, v []float64) {
		if i == 1 {
			positive(rng, i, v)
			return
		}
		for j := range v {
			v[j] = rng.NormFloat64()
		}
	}
	mm := func(ta, tb bool) func(g *graph.Graph, x []*graph.Node) *graph.Node {
		return func(g *graph.Graph, x []*graph.Node) *graph.Node { return graph.MatMulT(x[0], x[1], ta, tb) }
	}
	cases := []gradCase{
		unary("neg", graph.Neg, nil),
		unary("exp", graph.Exp, nil),
		unary("log", graph.Log, positive),
		unary("sqrt", graph.Sqrt, positive),
		unary("relu", graph.Relu, spaced),
		unary("sigmoid", graph.Sigmoid, nil),
		unary("tanh", graph.Tanh, nil),
		{name: "cast", shapes: []tensor.Shape{{3, 5}}, init: grid, eps: 1.0 / 64,
			build: func(g *graph.Graph, x []*graph.Node) *graph.Node {
				return graph.Cast(graph.Mul(graph.Cast(x[0], tensor.Float32), g.Scalar(3, tensor.Float32)), tensor.Float64)
			}},
		binary("add", graph.Add, tensor.Shape{3, 4}, tensor.Shape{3, 4}, nil),
		binary("add/bias", graph.Add, tensor.Shape{3, 4}, tensor.Shape{4}, nil),
		binary("add/outer", graph.Add, tensor.Shape{3, 1}, tensor.Shape{1, 4}, nil),
		binary("sub/scalar", graph.Sub, tensor.Shape{}, tensor.Shape{2, 3}, nil),
		binary("sub", graph.Sub, tensor.Shape{2, 3}, tensor.Shape{2, 1}, nil),
		binary("mul", graph.Mul, tensor.Shape{2, 3, 4}, tensor.Shape{3, 1}, nil),
		binary("mul/same", graph.Mul, tensor.Shape{5}, tensor.Shape{5}, nil),
		binary("div", graph.Div, tensor.Shape{3, 4}, tensor.Shape{4}, divInit),
		binary("maximum", graph.Maximum, tensor.Shape{3, 4}, tensor.Shape{3, 4}, spaced),
		binary("minimum", graph.Minimum, tensor.Shape{3, 4}, tensor.Shape{4}, spaced),
		{name: "where", shapes: []tensor.Shape{{3, 4}, {4}}, init: spaced,
			build: func(g *graph.Graph, x []*graph.Node) *graph.Node {
				return graph.Where(graph.Greater(x[0], g.Scalar(0, tensor.Float64)), x[0], x[1])
			}},
		{name: "reduce_sum/all", shapes: []tensor.Shape{{2, 3, 4}}, build: func(g *graph.Graph, x []*graph.Node) *graph.Node { return graph.ReduceSum(x[0]) }},
		{name: "reduce_sum/axis1", shapes: []tensor.Shape{{2, 3, 4}}, build: func(g *graph.Graph, x []*graph.Node) *graph.Node { return graph.ReduceSum(x[0], 1) }},
		{name: "reduce_sum/keep", shapes: []tensor.Shape{{2, 3, 4}}, build: func(g *graph.Graph, x []*graph.Node) *graph.Node { return graph.ReduceSumKeep(x[0], 0, 2) }},
		{name: "reduce_mean", shapes: []tensor.Shape{{2, 3, 4}}, build: func(g *graph.Graph, x []*graph.Node) *graph.Node { return graph.ReduceMean(x[0], -1) }},
		{name: "reduce_max", shapes: []tensor.Shape{{3, 5}}, init: spaced, build: func(g *graph.Graph, x []*graph.Node) *graph.Node { return graph.ReduceMax(x[0], 1) }},
		{name: "reduce_max/all", shapes: []tensor.Shape{{3, 5}}, init: spaced, build: func(g *graph.Graph, x []*graph.Node) *graph.Node { return graph.ReduceMaxKeep(x[0]) }},
		{name: "matmul", shapes: []tensor.Shape{{3, 4}, {4, 5}}, build: mm(false, false)},
		{name: "matmul/ta", shapes: []tensor.Shape{{4, 3}, {4, 5}}, build: mm(true, false)},
		{name: "matmul/tb", shapes: []tensor.Shape{{3, 4}, {5, 4}}, build: mm(false, true)},
		{name: "matmul/ta_tb", shapes: []tensor.Shape{{4, 3}, {5, 4}}, build: mm(true, true)},
		{name: "matmul/batched", shapes: []tensor.Shape{{2, 3, 4}, {2, 4, 5}}, build: mm(false, false)},
		{name: "matmul/batched_tb", shapes: []tensor.Shape{{2, 3, 4}, {2, 5, 4}}, build: mm(false, true)},
		{name: "matmul/shared_b", shapes: []tensor.Shape{{2, 3, 4}, {4, 5}}, build: mm(false, false)},
		{name: "matmul/shared_b_tb", shapes: []tensor.Shape{{2, 3, 4}, {5, 4}}, build: mm(false, true)},
		unary("softmax", graph.Softmax, nil),
		unary("log_softmax", graph.LogSoftmax, nil),
		{name: "softmax_cross_entropy", shapes: []tensor.Shape{{4, 3}},
			build: func(g *graph.Graph, x []*graph.Node) *graph.Node {
				return graph.SoftmaxCrossEntropy(x[0], int32s(g, tensor.Shape{4}, 2, 0, 1, 2))
			}},
		{name: "reshape", shapes: []tensor.Shape{{2, 6}}, build: func(g *graph.Graph, x []*graph.Node) *graph.Node {
			return graph.Exp(graph.Reshape(x[0], 3, -1))
		}},
		{name: "transpose", shapes: []tensor.Shape{{2, 3, 4}}, build: func(g *graph.Graph, x []*graph.Node) *graph.Node { return graph.Transpose(x[0], 2, 0, 1) }},
		{name: "broadcast_to", shapes: []tensor.Shape{{3, 1}}, build: func(g *graph.Graph, x []*graph.Node) *graph.Node { return graph.BroadcastTo(x[0], 2, 3, 4) }},
		{name: "concat", shapes: []tensor.Shape{{2, 3}, {2, 1}, {2, 2}}, build: func(g *graph.Graph, x []*graph.Node) *graph.Node { return graph.Concat(1, x...) }},
		{name: "concat/axis0", shapes: []tensor.Shape{{1, 3}, {2, 3}}, build: func(g *graph.Graph, x []*graph.Node) *graph.Node { return graph.Concat(0, x...) }},
		{name: "slice", shapes: []tensor.Shape{{4, 5}}, build: func(g *graph.Graph, x []*graph.Node) *graph.Node {
			return graph.Slice(x[0], []int{1, 2}, []int{3, 5})
		}},
		{name: "gather", shapes: []tensor.Shape{{5, 3}}, build: func(g *graph.Graph, x []*graph.Node) *graph.Node {
			return graph.Gather(x[0], int32s(g, tensor.Shape{2, 2}, 4, 0, 4, 2)) // row 4 twice: gradients add
		}},
		unary("erf", graph.Erf, nil),
		unary("abs", graph.Abs, spaced),
		{name: "conv2d/valid", shapes: []tensor.Shape{{2, 5, 6, 3}, {3, 2, 3, 4}}, build: func(g *graph.Graph, x []*graph.Node) *graph.Node {
			return graph.Conv2D(x[0], x[1], [2]int{1, 1}, false)
		}},
		{name: "conv2d/same_stride2", shapes: []tensor.Shape{{2, 5, 6, 2}, {3, 3, 2, 3}}, build: func(g *graph.Graph, x []*graph.Node) *graph.Node {
			return graph.Conv2D(x[0], x[1], [2]int{2, 2}, true)
		}},
		{name: "max_pool2d", shapes: []tensor.Shape{{2, 4, 6, 3}}, init: spaced, build: func(g *graph.Graph, x []*graph.Node) *graph.Node {
			return graph.MaxPool2D(x[0], [2]int{2, 2}, [2]int{2, 2}, false)
		}},
		{name: "max_pool2d/same_overlap", shapes: []tensor.Shape{{1, 5, 5, 2}}, init: spaced, build: func(g *graph.Graph, x []*graph.Node) *graph.Node {
			return graph.MaxPool2D(x[0], [2]int{3, 3}, [2]int{2, 2}, true)
		}},
		{name: "avg_pool2d", shapes: []tensor.Shape{{2, 4, 6, 3}}, build: func(g *graph.Graph, x []*graph.Node) *graph.Node {
			return graph.AvgPool2D(x[0], [2]int{2, 3}, [2]int{2, 3}, false)
		}},
		{name: "avg_pool2d/same", shapes: []tensor.Shape{{1, 5, 5, 2}}, build: func(g *graph.Graph, x []*graph.Node) *graph.Node {
			return graph.AvgPool2D(x[0], [2]int{3, 3}, [2]int{2, 2}, true)
		}},
		{name: "mlp_block", shapes: []tensor.Shape{{4, 3}, {3, 5}, {5}}, build: func(g *graph.Graph, x []*graph.Node) *graph.Node {
			return graph.Tanh(graph.Add(graph.MatMul(x[0], x[1]), x[2]))
		}},
	}
	for _, family := range familyGradCases {
		cases = append(cases, family()...)
	}
	return cases
}

// familyGradCases are the checks of the op families whose tests live in
// files of their own (vision_gradcheck_test.go, sequence_test.go), added
// by registerGradCases when the test binary initializes.
var familyGradCases []func() []gradCase

func registerGradCases(f func() []gradCase) { familyGradCases = append(familyGradCases, f) }

func TestGradients(t *testing.T) {
	for _, c := range gradCases() {
		t.Run(c.name, func(t *testing.T) {
			// the inputs are drawn from the case's name, not its place in
			// the list: a family added elsewhere changes no other case
			h := fnv.New64a()
			h.Write([]byte(c.name))
			checkGrad(t, c, h.Sum64())
		})
	}
}

func checkGrad(t *testing.T, c gradCase, seed uint64) {
	r := newGradRun(t, c, seed, nil)
	defer r.close()
	r.loss()
	analytic := r.grads()
	eps := c.eps
	if eps == 0 {
		eps = 1e-6
	}
	for i := range r.vals {
		numeric := testutil.NumericGrad(func([]float64) float64 { return r.loss() }, r.vals[i], eps)
		if e := testutil.RelErr(analytic[i], numeric); !(e < 1e-6) {
			t.Errorf("input %d: relative error %.3g >= 1e-6\nanalytic %v\nnumeric  %v", i, e, analytic[i], numeric)
		}
	}
}

// gradRun is c's loss sum(out * R), for a fixed random R, and its
// gradients, compiled (recomputing what keep does not hold) and loaded,
// with the variables drawn by c.init; vals views each variable's values.
type gradRun struct {
	t    *testing.T
	e    *runtime.Engine
	x    *runtime.Executable
	vals [][]float64
}

func newGradRun(t *testing.T, c gradCase, seed uint64, keep func(*graph.Node) bool) *gradRun {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	var xs []*graph.Node
	prog, err := compile.Build(func() (*graph.Graph, compile.Options) {
		g := graph.New()
		xs = xs[:0]
		for i, s := range c.shapes {
			xs = append(xs, g.Param(string(rune('a'+i)), tensor.Float64, s))
		}
		out := c.build(g, xs)
		r := tensor.New(tensor.Float64, out.Shape())
		for i := 0; i < r.Len(); i++ {
			r.SetFloat64At(i, rng.NormFloat64())
		}
		loss := graph.ReduceSum(graph.Mul(out, g.Constant(r)))
		opt := compile.Options{Target: cpu.New(0), Outputs: []compile.Output{{Name: "loss", Node: loss}}}
		for i, gr := range autodiff.GradWith(loss, autodiff.Options{Keep: keep}, xs...) {
			opt.Outputs = append(opt.Outputs, compile.Output{Name: "grad" + string(rune('a'+i)), Node: gr, Grad: true})
		}
		return g, opt
	})
	if err != nil {
		t.Fatal(err)
	}
	r := &gradRun{t: t, e: runtime.NewEngine(cpu.New(0), 0)}
	if r.x, err = r.e.Load(prog); err != nil {
		r.e.Close()
		t.Fatal(err)
	}
	for i, n := range xs {
		v, _ := r.e.Variable(n.Attr().Name)
		vals := v.Tensor().Float64s()
		if c.init != nil {
			c.init(rng, i, vals)
		} else {
			for j := range vals {
				vals[j] = rng.NormFloat64()
			}
		}
		r.vals = append(r.vals, vals)
	}
	return r
}

// loss runs the step and returns the loss.
func (r *gradRun) loss() float64 {
	if err := r.x.Run(); err != nil {
		r.t.Fatal(err)
	}
	l, _ := r.x.Output("loss")
	return l.Float64s()[0]
}

// grads returns copies of the last run's gradients.
func (r *gradRun) grads() [][]float64 {
	out := make([][]float64, len(r.vals))
	for i := range out {
		g, _ := r.x.Output("grad" + string(rune('a'+i)))
		out[i] = append([]float64(nil), g.Float64s()...)
	}
	return out
}

func (r *gradRun) close() {
	r.x.Close()
	r.e.Close()
}

// TestGradientsCoverEveryRule proves the checks above exercise every op with
// a VJP rule: adding a rule without a check fails here.
func TestGradientsCoverEveryRule(t *testing.T) {
	covered := map[graph.Op]bool{}
	for _, c := range gradCases() {
		g := graph.New()
		var xs []*graph.Node
		for i, s := range c.shapes {
			xs = append(xs, g.Param(string(rune('a'+i)), tensor.Float64, s))
		}
		c.build(g, xs)
		for _, n := range g.Nodes() {
			covered[n.Op()] = true
		}
	}
	for op := graph.Op(0); op < graph.NumOps; op++ {
		if autodiff.Differentiable(op) && !covered[op] {
			t.Errorf("op %s has a gradient rule but no gradient check", op)
		}
	}
}

// TestRematGivesTheSameGradients recomputes every forward value the
// backward pass reads (Keep never holds) and checks the gradients are the
// same bits as with every activation kept.
func TestRematGivesTheSameGradients(t *testing.T) {
	for ci, c := range gradCases() {
		t.Run(c.name, func(t *testing.T) {
			kept := gradsOf(t, c, uint64(ci), nil)
			remat := gradsOf(t, c, uint64(ci), func(*graph.Node) bool { return false })
			for i := range kept {
				for j := range kept[i] {
					if math.Float64bits(kept[i][j]) != math.Float64bits(remat[i][j]) {
						t.Fatalf("input %d element %d: %v with remat, %v without", i, j, remat[i][j], kept[i][j])
					}
				}
			}
		})
	}
}

func gradsOf(t *testing.T, c gradCase, seed uint64, keep func(*graph.Node) bool) [][]float64 {
	r := newGradRun(t, c, seed, keep)
	defer r.close()
	r.loss()
	return r.grads()
}
