package onnx

import (
	"bytes"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

func TestActivationParams(t *testing.T) {
	cases := []struct {
		name   string
		r      Range
		signed bool
		scale  float32
		zp     int
	}{
		{"relu output", Range{0, 2.55}, false, 0.01, 0},
		{"symmetric", Range{-1.275, 1.275}, false, 0.01, 128},
		{"symmetric int8", Range{-1.275, 1.275}, true, 0.01, 0},
		{"all negative holds 0", Range{-2.55, -1}, false, 0.01, 255},
		{"all negative int8", Range{-2.55, -1}, true, 0.01, 127},
		{"constant 0", Range{0, 0}, false, 1, 0},
		{"positive from 1 holds 0", Range{1, 5.1}, false, 0.02, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			scale, zp := activationParams(c.r, c.signed)
			if math.Abs(float64(scale-c.scale)) > 1e-7 || zp != c.zp {
				t.Errorf("scale, zero point = %v, %d, want %v, %d", scale, zp, c.scale, c.zp)
			}
		})
	}
}

// int8Model writes m as int8 with ranges calibrated on random batches and
// returns the decoded graph.
func int8Graph(t *testing.T, m Model, opt Int8Options) msg {
	t.Helper()
	rng := rand.New(rand.NewPCG(9, 9))
	ranges, err := Calibrate(m, 2, func(_ int, in map[string]tensor.Tensor) error {
		for _, v := range in {
			for i, f := 0, v.Float32s(); i < len(f); i++ {
				f[i] = float32(rng.NormFloat64())
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	opt.Ranges = ranges
	return written(t, m, Options{Int8: &opt}).sub(t, 7)
}

func TestQuantizedWeights(t *testing.T) {
	for _, c := range []struct {
		name   string
		reduce bool
		qmax   float64
	}{{"8 bits", false, 127}, {"reduce range", true, 63}} {
		t.Run(c.name, func(t *testing.T) {
			m, w := mlpModel(t, 4)
			g := int8Graph(t, m, Int8Options{ReduceRange: c.reduce})
			q := initializer(t, g, "dense/kernel/int8")
			scale := initializer(t, g, "dense/kernel/scale")
			zp := initializer(t, g, "dense/kernel/zero_point")
			if q.int(t, 2) != dtInt8 || !slices.Equal(q.ints(t, 1), []int64{20, 32}) {
				t.Fatalf("int8 kernel: type %d dims %v, want int8 [20 32]", q.int(t, 2), q.ints(t, 1))
			}
			if !slices.Equal(scale.ints(t, 1), []int64{32}) || !slices.Equal(zp.ints(t, 1), []int64{32}) || zp.int(t, 2) != dtInt8 {
				t.Fatalf("scale dims %v, zero point dims %v type %d: want one per output column", scale.ints(t, 1), zp.ints(t, 1), zp.int(t, 2))
			}
			if z := []byte(zp.str(t, 9)); !bytes.Equal(z, make([]byte, 32)) {
				t.Errorf("zero points %v, want 0 (symmetric)", z)
			}
			qs := []byte(q.str(t, 9))
			ss := tensor.As[float32]([]byte(scale.str(t, 9)))
			orig := w["dense/kernel"].Float32s()
			for col := 0; col < 32; col++ {
				absMax, qMaxSeen := 0.0, 0.0
				for row := 0; row < 20; row++ {
					i := row*32 + col
					v := float64(int8(qs[i]))
					qMaxSeen = max(qMaxSeen, math.Abs(v))
					absMax = max(absMax, math.Abs(float64(orig[i])))
					if d := math.Abs(v*float64(ss[col]) - float64(orig[i])); d > float64(ss[col])/2+1e-7 {
						t.Fatalf("w[%d,%d] = %v dequantizes to %v: error %v > scale/2", row, col, orig[i], v*float64(ss[col]), d)
					}
				}
				if want := absMax / c.qmax; math.Abs(float64(ss[col])-want) > 1e-6*want {
					t.Errorf("column %d scale %v, want max|w|/%v = %v", col, ss[col], c.qmax, want)
				}
				if qMaxSeen != c.qmax {
					t.Errorf("column %d: largest |q| %v, want %v", col, qMaxSeen, c.qmax)
				}
			}
			for _, n := range g.subs(t, 5) {
				if n.str(t, 8) == "dense/kernel" {
					t.Errorf("the float kernel is stored too")
				}
			}
			// the DequantizeLinear of the kernel is per column (axis 1)
			for _, n := range g.subs(t, 1) {
				if n.str(t, 4) == "DequantizeLinear" && n.strs(t, 1)[0] == "dense/kernel/int8" {
					if a := n.sub(t, 5); a.str(t, 1) != "axis" || a.int(t, 3) != 1 {
						t.Errorf("kernel DequantizeLinear attribute %q = %d, want axis 1", a.str(t, 1), a.int(t, 3))
					}
				}
			}
		})
	}
}

func TestInt8QDQPlacement(t *testing.T) {
	m, _ := mlpModel(t, 4)
	g := int8Graph(t, m, Int8Options{})
	got := opTypes(t, g)
	// per dense: QDQ on the activation, DQ on the kernel, then MatMul; the
	// biases, activations and softmax stay float
	want := []string{"Reshape",
		"QuantizeLinear", "DequantizeLinear", "DequantizeLinear", "MatMul", "Add", "Relu",
		"QuantizeLinear", "DequantizeLinear", "DequantizeLinear", "MatMul", "Add", "Tanh",
		"QuantizeLinear", "DequantizeLinear", "DequantizeLinear", "MatMul", "Add", "Softmax", "Identity"}
	if !slices.Equal(got, want) {
		t.Errorf("nodes\n%v, want\n%v", got, want)
	}
}

func TestCalibrate(t *testing.T) {
	g := graph.New()
	x := g.Input("x", tensor.Float32, tensor.Shape{4, 3})
	w := g.Param("w", tensor.Float32, tensor.Shape{3, 2})
	h := graph.Relu(graph.MatMul(x, w)) // [4, 2]
	w2 := g.Param("w2", tensor.Float32, tensor.Shape{2, 2})
	y := graph.MatMul(h, w2)
	wt := map[string]tensor.Tensor{
		"w":  tensor.FromSlice(tensor.Shape{3, 2}, []float32{1, -1, 0, 2, 0, 0}),
		"w2": tensor.FromSlice(tensor.Shape{2, 2}, []float32{1, 0, 0, 1}),
	}
	m := Model{Graph: g, Outputs: []Output{{"y", y}}, Weights: weightsOf(wt)}
	if got := Quantized(m); !slices.Equal(got, []*graph.Node{x, h}) {
		t.Fatalf("Quantized = %v, want [x relu]", got)
	}
	batches := [][]float32{
		{0, 1, 0, -2, 0, 0, 3, 0, 0, 1, 1, 0}, // x·w rows: [0 2], [-2 2], [3 -3], [1 1]
		{0.5, 0, 0, -4, 0, 0, 0, 5, 0, 0, 0, 0},
	}
	r, err := Calibrate(m, len(batches), func(i int, in map[string]tensor.Tensor) error {
		copy(in["x"].Float32s(), batches[i])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// x: min -4, max 5; x·w of batch 2: [0.5 -0.5], [-4 4], [0 10], [0 0]:
	// after relu, min 0 and max 10
	if got, want := r[x], (Range{-4, 5}); got != want {
		t.Errorf("range of x %v, want %v", got, want)
	}
	if got, want := r[h], (Range{0, 10}); got != want {
		t.Errorf("range of relu(x·w) %v, want %v", got, want)
	}
	if len(r) != 2 {
		t.Errorf("%d ranges, want 2", len(r))
	}
}

func TestInt8FileSize(t *testing.T) {
	tm := testModels(t)[1] // the reference cnn
	g, ins, outs := tm.build(8)
	w := randomWeights(g, rand.New(rand.NewPCG(1, 3)))
	m := Model{Graph: g, Inputs: ins, Outputs: outs, Weights: weightsOf(w)}
	rng := rand.New(rand.NewPCG(2, 3))
	ranges, err := Calibrate(m, 1, func(_ int, in map[string]tensor.Tensor) error {
		uniformImages(rng, nil, in["x"])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var f32, i8 bytes.Buffer
	if err := Write(&f32, m, Options{}); err != nil {
		t.Fatal(err)
	}
	if err := Write(&i8, m, Options{Int8: &Int8Options{Ranges: ranges}}); err != nil {
		t.Fatal(err)
	}
	ratio := float64(i8.Len()) / float64(f32.Len())
	t.Logf("cnn: float %d B, int8 %d B (%.3fx)", f32.Len(), i8.Len(), ratio)
	if ratio > 0.3 {
		t.Errorf("int8 model is %.3fx the float one, want <= 0.3x", ratio)
	}
}

// TestReshapedWeights: the attention projections read their kernels
// [d, H, dim] reshaped to [d, H·dim]. The export stores a reshaped weight
// once, in the shape read: as is in a float model, int8 per output column
// (and not calibrated as an activation) in an int8 one.
func TestReshapedWeights(t *testing.T) {
	var tm testModel
	for _, m := range testModels(t) {
		if m.name == "gpt" {
			tm = m
		}
	}
	g, ins, outs := tm.build(4)
	w := randomWeights(g, rand.New(rand.NewPCG(1, 4)))
	m := Model{Graph: g, Inputs: ins, Outputs: outs, Weights: weightsOf(w)}
	const kernel = "block0/attention/query/kernel" // [12, 3, 4]
	for _, n := range Quantized(m) {
		if n.Op() == graph.OpReshape && isLeaf(n.Inputs()[0]) {
			t.Errorf("Quantized lists the reshaped weight %s", n)
		}
	}
	rng := rand.New(rand.NewPCG(2, 4))
	ranges, err := Calibrate(m, 1, func(_ int, in map[string]tensor.Tensor) error {
		tm.feed(rng, nil, in["x"])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	names := func(gp msg) []string {
		var out []string
		for _, in := range gp.subs(t, 5) {
			out = append(out, in.str(t, 8))
		}
		return out
	}
	f32 := written(t, m, Options{}).sub(t, 7)
	if k := initializer(t, f32, kernel+"/reshaped"); !slices.Equal(k.ints(t, 1), []int64{12, 12}) {
		t.Errorf("float: %s/reshaped dims %v, want [12 12]", kernel, k.ints(t, 1))
	}
	if slices.Contains(names(f32), kernel) {
		t.Errorf("float: %s is stored in its own shape too", kernel)
	}
	i8 := written(t, m, Options{Int8: &Int8Options{Ranges: ranges}}).sub(t, 7)
	q := initializer(t, i8, kernel+"/reshaped/int8")
	if q.int(t, 2) != dtInt8 || !slices.Equal(q.ints(t, 1), []int64{12, 12}) {
		t.Errorf("int8: %s/reshaped/int8 type %d dims %v, want int8 [12 12]", kernel, q.int(t, 2), q.ints(t, 1))
	}
	if s := initializer(t, i8, kernel+"/reshaped/scale"); !slices.Equal(s.ints(t, 1), []int64{12}) {
		t.Errorf("int8: scale dims %v, want one per output column [12]", s.ints(t, 1))
	}
	for _, name := range names(i8) {
		if name == kernel || name == kernel+"/reshaped" {
			t.Errorf("int8: the float kernel %s is stored too", name)
		}
	}
}
