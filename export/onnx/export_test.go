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

// written exports m and returns the decoded ModelProto.
func written(t *testing.T, m Model, opt Options) msg {
	t.Helper()
	var buf bytes.Buffer
	if err := Write(&buf, m, opt); err != nil {
		t.Fatal(err)
	}
	return mustDecode(t, buf.Bytes())
}

// opTypes returns the op_type of every node of graph g.
func opTypes(t *testing.T, g msg) []string {
	t.Helper()
	var out []string
	for _, n := range g.subs(t, 1) {
		out = append(out, n.str(t, 4))
	}
	return out
}

// initializer returns graph g's initializer named name.
func initializer(t *testing.T, g msg, name string) msg {
	t.Helper()
	for _, in := range g.subs(t, 5) {
		if in.str(t, 8) == name {
			return in
		}
	}
	t.Fatalf("no initializer %q", name)
	return nil
}

// dimsOf returns a ValueInfoProto's dims, "N"-style params as -1, and the
// param names.
func dimsOf(t *testing.T, v msg) ([]int64, []string) {
	t.Helper()
	var dims []int64
	var params []string
	for _, d := range v.sub(t, 2).sub(t, 1).sub(t, 2).subs(t, 1) {
		if _, ok := d[2]; ok {
			dims = append(dims, -1)
			params = append(params, d.str(t, 2))
		} else {
			dims = append(dims, d.int(t, 1))
			params = append(params, "")
		}
	}
	return dims, params
}

func mlpModel(t *testing.T, b int) (Model, map[string]tensor.Tensor) {
	tm := testModels(t)[0] // mlp_softmax
	g, ins, outs := tm.build(b)
	w := randomWeights(g, rand.New(rand.NewPCG(1, 2)))
	return Model{Graph: g, Inputs: ins, Outputs: outs, Weights: weightsOf(w),
		Doc: "an mlp", Metadata: map[string]string{"z": "last", "classes": "[0,1,2,3,4]"}}, w
}

func TestWriteMLP(t *testing.T) {
	m, w := mlpModel(t, 4)
	mp := written(t, m, Options{ProducerVersion: "test"})
	if got := mp.int(t, 1); got != 8 {
		t.Errorf("ir_version %d, want 8 (opset 17)", got)
	}
	if got := mp.sub(t, 8).int(t, 2); got != DefaultOpset {
		t.Errorf("opset %d, want %d", got, DefaultOpset)
	}
	if mp.str(t, 2) != "headroom" || mp.str(t, 3) != "test" || mp.str(t, 6) != "an mlp" {
		t.Errorf("producer %q %q, doc %q", mp.str(t, 2), mp.str(t, 3), mp.str(t, 6))
	}
	var keys []string
	for _, kv := range mp.subs(t, 14) {
		keys = append(keys, kv.str(t, 1))
	}
	if !slices.Equal(keys, []string{"classes", "z"}) {
		t.Errorf("metadata keys %v, want [classes z] (sorted)", keys)
	}
	g := mp.sub(t, 7)
	want := []string{"Reshape", "MatMul", "Add", "Relu", "MatMul", "Add", "Tanh", "MatMul", "Add", "Softmax", "Identity"}
	if got := opTypes(t, g); !slices.Equal(got, want) {
		t.Errorf("nodes %v, want %v", got, want)
	}
	in := g.sub(t, 11)
	if dims, params := dimsOf(t, in); in.str(t, 1) != "x" || !slices.Equal(dims, []int64{-1, 4, 5}) || params[0] != BatchDim {
		t.Errorf("input %q dims %v %q, want x [N 4 5]", in.str(t, 1), dims, params)
	}
	out := g.sub(t, 12)
	if dims, params := dimsOf(t, out); out.str(t, 1) != "out" || !slices.Equal(dims, []int64{-1, 5}) || params[0] != BatchDim {
		t.Errorf("output %q dims %v %q, want out [N 5]", out.str(t, 1), dims, params)
	}
	k := initializer(t, g, "dense/kernel")
	if got := k.ints(t, 1); !slices.Equal(got, []int64{20, 32}) || k.int(t, 2) != dtFloat {
		t.Errorf("dense/kernel dims %v type %d, want [20 32] float", got, k.int(t, 2))
	}
	if !bytes.Equal([]byte(k.str(t, 9)), w["dense/kernel"].Bytes()) {
		t.Errorf("dense/kernel raw_data differs from the weight")
	}
	// the flatten's target keeps the batch symbolic
	var shape msg
	for _, n := range g.subs(t, 1) {
		if n.str(t, 4) == "Reshape" {
			shape = initializer(t, g, n.strs(t, 1)[1])
		}
	}
	if got := tensor.As[int64]([]byte(shape.str(t, 9))); !slices.Equal(got, []int64{-1, 20}) {
		t.Errorf("flatten target %v, want [-1 20]", got)
	}
}

func TestConvFilterStoredOIHW(t *testing.T) {
	tm := testModels(t)[2] // conv_same
	g, ins, outs := tm.build(2)
	w := randomWeights(g, rand.New(rand.NewPCG(3, 4)))
	gp := written(t, Model{Graph: g, Inputs: ins, Outputs: outs, Weights: weightsOf(w)}, Options{}).sub(t, 7)
	k := initializer(t, gp, "conv/kernel/oihw")
	hwio := w["conv/kernel"] // [3, 3, 3, 8]
	if got := k.ints(t, 1); !slices.Equal(got, []int64{8, 3, 3, 3}) {
		t.Fatalf("oihw dims %v, want [8 3 3 3]", got)
	}
	oihw := tensor.As[float32]([]byte(k.str(t, 9)))
	src := hwio.Float32s()
	for o := 0; o < 8; o++ {
		for i := 0; i < 3; i++ {
			for h := 0; h < 3; h++ {
				for x := 0; x < 3; x++ {
					if got, want := oihw[((o*3+i)*3+h)*3+x], src[((h*3+x)*3+i)*8+o]; got != want {
						t.Fatalf("oihw[%d,%d,%d,%d] = %v, want hwio[%d,%d,%d,%d] = %v", o, i, h, x, got, h, x, i, o, want)
					}
				}
			}
		}
	}
	for _, n := range gp.subs(t, 5) {
		if n.str(t, 8) == "conv/kernel" {
			t.Errorf("the HWIO filter is stored too")
		}
	}
}

func TestPads(t *testing.T) {
	cases := []struct {
		name    string
		h, w    int
		k, s    [2]int
		same    bool
		want    []int64
		comment string
	}{
		{"valid", 28, 28, [2]int{3, 3}, [2]int{1, 1}, false, []int64{0, 0, 0, 0}, ""},
		{"same 3x3 s1", 28, 28, [2]int{3, 3}, [2]int{1, 1}, true, []int64{1, 1, 1, 1}, ""},
		// TensorFlow: out = ceil(13/2) = 7, total = 6*2+3-13 = 2 -> 1, 1
		{"same 3x3 s2 odd", 13, 13, [2]int{3, 3}, [2]int{2, 2}, true, []int64{1, 1, 1, 1}, ""},
		// out = 6, total = 5*2+3-12 = 1: the odd cell goes at the end
		{"same 3x3 s2 even", 12, 12, [2]int{3, 3}, [2]int{2, 2}, true, []int64{0, 0, 1, 1}, ""},
		{"same 2x3 s(1,2)", 7, 6, [2]int{2, 3}, [2]int{1, 2}, true, []int64{0, 0, 1, 1}, ""},
		{"same 1x1 s2", 5, 5, [2]int{1, 1}, [2]int{2, 2}, true, []int64{0, 0, 0, 0}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := pads(c.h, c.w, c.k, c.s, c.same); !slices.Equal(got, c.want) {
				t.Errorf("pads = %v, want %v", got, c.want)
			}
		})
	}
}

func TestPermute(t *testing.T) {
	src := tensor.New(tensor.Float32, tensor.Shape{2, 3, 4})
	for i, f := 0, src.Float32s(); i < len(f); i++ {
		f[i] = float32(i)
	}
	dst := permute(src, []int{2, 0, 1}) // [4, 2, 3]
	if !dst.Shape().Equal(tensor.Shape{4, 2, 3}) {
		t.Fatalf("shape %v, want [4 2 3]", dst.Shape())
	}
	for a := 0; a < 4; a++ {
		for b := 0; b < 2; b++ {
			for c := 0; c < 3; c++ {
				if got, want := dst.Float32s()[(a*2+b)*3+c], float32((b*3+c)*4+a); got != want {
					t.Fatalf("dst[%d,%d,%d] = %v, want %v", a, b, c, got, want)
				}
			}
		}
	}
}

func TestBatchAxes(t *testing.T) {
	const b = 3
	cases := []struct {
		name  string
		build func(g *graph.Graph, x *graph.Node) *graph.Node // x: [B, 4, 6]
		dims  []int64                                         // -1: the batch
		param string
	}{
		{"transpose", func(g *graph.Graph, x *graph.Node) *graph.Node { return graph.Transpose(x, 2, 0, 1) }, []int64{6, -1, 4}, "N"},
		{"reduce keeps", func(g *graph.Graph, x *graph.Node) *graph.Node { return graph.ReduceSum(x, 1) }, []int64{-1, 6}, "N"},
		{"reduce over batch", func(g *graph.Graph, x *graph.Node) *graph.Node { return graph.ReduceMean(x, 0) }, []int64{4, 6}, ""},
		{"rows of B*4", func(g *graph.Graph, x *graph.Node) *graph.Node { return graph.Reshape(x, b*4, 6) }, []int64{-1, 6}, "4*N"},
		{"matmul contracts batch", func(g *graph.Graph, x *graph.Node) *graph.Node {
			f := graph.Reshape(x, b, 24)
			return graph.MatMulT(f, f, true, false) // [24, 24]
		}, []int64{24, 24}, ""},
		{"matmul batch as columns", func(g *graph.Graph, x *graph.Node) *graph.Node {
			f := graph.Reshape(x, b, 24)
			w := g.Param("w", tensor.Float32, tensor.Shape{2, 24})
			return graph.MatMulT(w, f, false, true) // [2, B]
		}, []int64{2, -1}, "N"},
		{"gather rows by batch ids", func(g *graph.Graph, x *graph.Node) *graph.Node {
			emb := g.Param("emb", tensor.Float32, tensor.Shape{5, 2})
			return graph.Gather(emb, graph.Cast(graph.Slice(x, []int{0, 0, 0}, []int{b, 1, 6}), tensor.Int32)) // [B, 1, 6, 2]
		}, []int64{-1, 1, 6, 2}, "N"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := graph.New()
			x := g.Input("x", tensor.Float32, tensor.Shape{b, 4, 6})
			y := c.build(g, x)
			w := randomWeights(g, rand.New(rand.NewPCG(1, 1)))
			mp := written(t, Model{Graph: g, Inputs: []*graph.Node{x}, Outputs: []Output{{"y", y}}, Weights: weightsOf(w)}, Options{})
			dims, params := dimsOf(t, mp.sub(t, 7).sub(t, 12))
			if !slices.Equal(dims, c.dims) {
				t.Errorf("output dims %v, want %v", dims, c.dims)
			}
			if i := slices.Index(dims, -1); i >= 0 && params[i] != c.param {
				t.Errorf("batch dimension %q, want %q", params[i], c.param)
			}
		})
	}
}

func TestWriteErrors(t *testing.T) {
	type built struct {
		m   Model
		opt Options
	}
	cases := []struct {
		name        string
		build       func() built
		unsupported graph.Op // an *UnsupportedError for this op, or
		want        string   // text the error must contain
	}{
		{"loss op", func() built {
			g := graph.New()
			x := g.Input("x", tensor.Float32, tensor.Shape{2, 3})
			y := g.Input("y", tensor.Int32, tensor.Shape{2})
			g.PushScope("loss")
			l := graph.SoftmaxCrossEntropy(x, y)
			g.PopScope()
			return built{m: Model{Graph: g, Outputs: []Output{{"loss", l}}}}
		}, graph.OpSoftmaxCrossEntropy, "(in loss/softmax_cross_entropy): a training loss"},
		{"constant sized by the batch", func() built {
			g := graph.New()
			x := g.Input("x", tensor.Float32, tensor.Shape{2, 3})
			return built{m: Model{Graph: g, Outputs: []Output{{"y", graph.Add(x, g.Full(1, tensor.Float32, tensor.Shape{2, 3}))}}}}
		}, graph.OpAdd, "does not scale with the batch"},
		{"reshape splits the batch", func() built {
			g := graph.New()
			x := g.Input("x", tensor.Float32, tensor.Shape{4, 3})
			return built{m: Model{Graph: g, Outputs: []Output{{"y", graph.Reshape(x, 2, 6)}}}}
		}, graph.OpReshape, "splits the batch"},
		{"missing weight", func() built {
			m, _ := mlpModel(t, 2)
			m.Weights = func(string) (tensor.Tensor, bool) { return tensor.Tensor{}, false }
			return built{m: m}
		}, 0, `no value for weight "dense/kernel"`},
		{"weight of another shape", func() built {
			m, w := mlpModel(t, 2)
			w["dense_1/bias"] = tensor.New(tensor.Float32, tensor.Shape{3})
			return built{m: m}
		}, 0, `weight "dense_1/bias" is float32[3]`},
		{"input left out", func() built {
			m, _ := opsModelAt(2)
			m.Inputs = m.Inputs[:2]
			return built{m: m}
		}, 0, `input "hot", which is not one of the model's inputs`},
		{"opset", func() built {
			m, _ := mlpModel(t, 2)
			return built{m: m, opt: Options{Opset: 16}}
		}, 0, "opset 16 not supported"},
		{"int8 without ranges", func() built {
			m, _ := mlpModel(t, 2)
			return built{m: m, opt: Options{Int8: &Int8Options{}}}
		}, 0, "without calibrated ranges"},
		{"int8 missing a range", func() built {
			m, _ := mlpModel(t, 2)
			return built{m: m, opt: Options{Int8: &Int8Options{Ranges: Ranges{}}}}
		}, 0, "no calibrated range for flatten/reshape"},
		{"output of another graph", func() built {
			m, _ := mlpModel(t, 2)
			o, _ := mlpModel(t, 2)
			m.Outputs = o.Outputs
			return built{m: m}
		}, 0, `output "out" is not a node of the graph`},
		{"repeated output name", func() built {
			m, _ := mlpModel(t, 2)
			m.Outputs = append(m.Outputs, m.Outputs[0])
			return built{m: m}
		}, 0, `output name "out" is empty or repeated`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := c.build()
			var buf bytes.Buffer
			err := Write(&buf, b.m, b.opt)
			if err == nil {
				t.Fatalf("Write succeeded, want an error containing %q", c.want)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q, want it to contain %q", err, c.want)
			}
			var ue *UnsupportedError
			if isUE := errors.As(err, &ue); isUE != (c.unsupported != 0) || (isUE && ue.Op != c.unsupported) {
				t.Errorf("error %v (%T): want *UnsupportedError for %v: %v", err, err, c.unsupported, c.unsupported != 0)
			}
			if buf.Len() != 0 {
				t.Errorf("%d bytes written on error", buf.Len())
			}
		})
	}
}

func opsModelAt(b int) (Model, map[string]tensor.Tensor) {
	g, ins, outs := opsModel(b)
	w := randomWeights(g, rand.New(rand.NewPCG(5, 6)))
	return Model{Graph: g, Inputs: ins, Outputs: outs, Weights: weightsOf(w)}, w
}

// convNode returns the graph's Conv node that reads filter (an
// initializer name prefix).
func convNode(t *testing.T, g msg, filter string) msg {
	t.Helper()
	for _, n := range g.subs(t, 1) {
		if n.str(t, 4) == "Conv" && strings.HasPrefix(n.strs(t, 1)[1], filter) {
			return n
		}
	}
	t.Fatalf("no Conv reads %s", filter)
	return nil
}

func TestConvBiasFolded(t *testing.T) {
	tm := testModels(t)[2] // conv_same
	g, ins, outs := tm.build(2)
	w := randomWeights(g, rand.New(rand.NewPCG(3, 4)))
	m := Model{Graph: g, Inputs: ins, Outputs: outs, Weights: weightsOf(w)}

	t.Run("float", func(t *testing.T) {
		gp := written(t, m, Options{}).sub(t, 7)
		in := convNode(t, gp, "conv/kernel").strs(t, 1)
		if len(in) != 3 || in[2] != "conv/bias" {
			t.Fatalf("Conv inputs %q, want the bias as the third", in)
		}
		if b := initializer(t, gp, "conv/bias"); !bytes.Equal([]byte(b.str(t, 9)), w["conv/bias"].Bytes()) {
			t.Errorf("folded bias differs from the weight")
		}
		for _, n := range gp.subs(t, 1) {
			if n.str(t, 4) == "Add" && slices.Contains(n.strs(t, 1), "conv/bias") {
				t.Errorf("the bias is added again by %q", n.str(t, 3))
			}
		}
	})
	t.Run("int8", func(t *testing.T) {
		gp := int8Graph(t, m, Int8Options{})
		in := convNode(t, gp, "conv/kernel").strs(t, 1)
		if len(in) != 3 || in[2] != "conv/bias/dequantized" {
			t.Fatalf("Conv inputs %q, want the dequantized int32 bias as the third", in)
		}
		q := initializer(t, gp, "conv/bias/int32")
		if q.int(t, 2) != dtInt32 {
			t.Fatalf("bias type %d, want int32", q.int(t, 2))
		}
		qs := tensor.As[int32]([]byte(q.str(t, 9)))
		bs := tensor.As[float32]([]byte(initializer(t, gp, "conv/bias/scale").str(t, 9)))
		xs := tensor.As[float32]([]byte(initializer(t, gp, in[0][:strings.LastIndex(in[0], "/")]+"/scale").str(t, 9)))
		ws := tensor.As[float32]([]byte(initializer(t, gp, "conv/kernel/oihw/scale").str(t, 9)))
		for f, b := range w["conv/bias"].Float32s() {
			if want := xs[0] * ws[f]; bs[f] != want {
				t.Errorf("bias %d scale %v, want input scale · filter scale = %v", f, bs[f], want)
			}
			if d := float64(qs[f])*float64(bs[f]) - float64(b); d > float64(bs[f])/2 || -d > float64(bs[f])/2 {
				t.Errorf("bias %d = %v dequantizes to %v", f, b, float64(qs[f])*float64(bs[f]))
			}
		}
	})
	t.Run("conv output is a model output", func(t *testing.T) {
		g := graph.New()
		x := g.Input("x", tensor.Float32, tensor.Shape{2, 5, 5, 1})
		k := g.Param("k", tensor.Float32, tensor.Shape{3, 3, 1, 2})
		b := g.Param("b", tensor.Float32, tensor.Shape{2})
		y := graph.Conv2D(x, k, [2]int{1, 1}, false)
		z := graph.Add(y, b)
		w := randomWeights(g, rand.New(rand.NewPCG(3, 5)))
		gp := written(t, Model{Graph: g, Outputs: []Output{{"y", y}, {"z", z}}, Weights: weightsOf(w)}, Options{}).sub(t, 7)
		if in := convNode(t, gp, "k").strs(t, 1); len(in) != 2 {
			t.Errorf("Conv inputs %q: the bias is folded into a convolution whose output is returned", in)
		}
	})
}
