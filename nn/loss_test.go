package nn_test

import (
	"math"
	"strings"
	"testing"

	"github.com/headroom-ml/headroom/autodiff"
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/tensor"
)

// logits [4, 3], with a row far beyond exp's range in each direction.
var (
	ceLogits = []float64{
		1, 2, 3,
		-0.5, 0, 0.25,
		1000, 0, -1000,
		-800, -801, -799,
	}
	ceLabels = []float64{2, 0, 2, 1}
)

// logSumExp is the stable log Σ exp(x).
func logSumExp(x []float64) float64 {
	mx := math.Inf(-1)
	for _, v := range x {
		mx = math.Max(mx, v)
	}
	s := 0.0
	for _, v := range x {
		s += math.Exp(v - mx)
	}
	return mx + math.Log(s)
}

// runLoss builds loss.PerExample over out(input) with float64 inputs of
// shape in and labels of the loss' dtype and shape, and returns the
// per-example losses, their shape, and the gradient of their mean with
// respect to the input.
func runLoss(t *testing.T, loss nn.Loss, in tensor.Shape, x, labels []float64, out func(*graph.Node) *graph.Node) (per []float64, shape tensor.Shape, grad []float64) {
	t.Helper()
	en := newEngine(t)
	p := en.load(func() (*graph.Graph, compileOptions) {
		g := graph.New()
		xin := g.Input("x", tensor.Float64, in)
		o := out(graph.AddScalar(xin, 0))
		y := g.Input("y", loss.LabelType(), append(tensor.Shape{in[0]}, loss.LabelShape(o.Shape())...))
		l := loss.PerExample(o, y)
		gr := autodiff.Grad(graph.ReduceMean(l), xin)[0]
		return g, outputs("loss", "per", l, "grad", gr)
	})
	p.set("x", x)
	p.set("y", labels)
	p.run()
	per, shape = p.get("per")
	grad, _ = p.get("grad")
	return per, shape, grad
}

func identity(x *graph.Node) *graph.Node { return x }

func TestSparseCategoricalCrossentropy(t *testing.T) {
	// Keras reads a softmax output through its logits: the same losses, and
	// finite where the probabilities underflow to 0.
	for _, tc := range []struct {
		name string
		out  func(*graph.Node) *graph.Node
	}{{"from_logits", identity}, {"softmax_output", graph.Softmax}} {
		t.Run(tc.name, func(t *testing.T) {
			per, shape, grad := runLoss(t, nn.SparseCategoricalCrossentropy{}, tensor.Shape{4, 3}, ceLogits, ceLabels, tc.out)
			if !shape.Equal(tensor.Shape{4}) {
				t.Fatalf("per-example loss shape %v, want [4]", shape)
			}
			for i := range 4 {
				row := ceLogits[i*3 : i*3+3]
				want := logSumExp(row) - row[int(ceLabels[i])]
				if !relClose(per[i], want, 1e-13, 1e-15) {
					t.Errorf("example %d: loss %v, want %v", i, per[i], want)
				}
				// d mean / d logit_j = (softmax_j − [j = label]) / batch
				lse := logSumExp(row)
				for j := range 3 {
					want := math.Exp(row[j] - lse)
					if j == int(ceLabels[i]) {
						want--
					}
					want /= 4
					if !relClose(grad[i*3+j], want, 1e-12, 1e-15) {
						t.Errorf("example %d: d loss/d logit %d = %v, want %v", i, j, grad[i*3+j], want)
					}
				}
			}
		})
	}
}

// The loss of each example is one number: for a sequence output [B, T, C]
// with labels [B, T] (LabelShape gives [T]) it averages the T positions, as
// binary_crossentropy and mse average the rest of an example, so that the
// step's mean and an evaluation's sum / N agree.
func TestSparseCrossEntropyPerExampleShape(t *testing.T) {
	loss := nn.SparseCategoricalCrossentropy{}
	if got := loss.LabelShape(tensor.Shape{4, 2, 3}); !got.Equal(tensor.Shape{2}) {
		t.Fatalf("LabelShape([4, 2, 3]) = %v, want [2]", got)
	}
	labels := []float64{2, 0, 1, 2, 0, 0, 2, 1}
	// the same 12 logit triples seen as [4, 2, 3]: 8 triples, reuse ceLogits twice
	x := append(append([]float64(nil), ceLogits...), ceLogits...)
	per, shape, _ := runLoss(t, loss, tensor.Shape{4, 2, 3}, x, labels, identity)
	if !shape.Equal(tensor.Shape{4}) {
		t.Fatalf("per-example loss of a [4, 2, 3] output has shape %v, want [4] (one loss per example)", shape)
	}
	for i := range 4 {
		want := 0.0
		for j := range 2 {
			k := i*2 + j
			row := x[k*3 : k*3+3]
			want += (logSumExp(row) - row[int(labels[k])]) / 2
		}
		if !relClose(per[i], want, 1e-13, 1e-15) {
			t.Errorf("example %d: loss %v, want %v", i, per[i], want)
		}
	}
}

// bceRef is the binary cross-entropy of logit x and label y,
// −y·log σ(x) − (1−y)·log(1−σ(x)), in a form exact for any |x|.
func bceRef(x, y float64) float64 {
	// log σ(x) = −softplus(−x), log(1−σ(x)) = −softplus(x)
	softplus := func(z float64) float64 {
		if z > 0 {
			return z + math.Log1p(math.Exp(-z))
		}
		return math.Log1p(math.Exp(z))
	}
	return y*softplus(-x) + (1-y)*softplus(x)
}

func sigmoidRef(x float64) float64 {
	if x >= 0 {
		return 1 / (1 + math.Exp(-x))
	}
	e := math.Exp(x)
	return e / (1 + e)
}

func TestBinaryCrossentropy(t *testing.T) {
	// [3, 4] logits with large |x|, zero, and soft labels.
	x := []float64{
		0, 1, -1, 2.5,
		100, -100, 100, -100,
		40, -40, 0.3, -7,
	}
	y := []float64{
		1, 0, 1, 0.3,
		0, 1, 1, 0,
		0.5, 0.2, 0, 1,
	}
	for i := range y { // the labels input is float32
		y[i] = float64(float32(y[i]))
	}
	for _, tc := range []struct {
		name string
		out  func(*graph.Node) *graph.Node
	}{{"sigmoid_output", graph.Sigmoid}, {"from_logits", identity}} {
		t.Run(tc.name, func(t *testing.T) {
			per, shape, grad := runLoss(t, nn.BinaryCrossentropy{}, tensor.Shape{3, 4}, x, y, tc.out)
			if !shape.Equal(tensor.Shape{3}) {
				t.Fatalf("per-example loss shape %v, want [3]", shape)
			}
			for i := range 3 {
				want := 0.0
				for j := range 4 {
					want += bceRef(x[i*4+j], y[i*4+j]) / 4
				}
				if math.IsInf(per[i], 0) || math.IsNaN(per[i]) || !relClose(per[i], want, 1e-13, 1e-15) {
					t.Errorf("example %d: loss %v, want %v", i, per[i], want)
				}
			}
			// d mean / d x = (σ(x) − y) / (3·4), also at x = 0 and |x| = 100
			for k := range x {
				want := (sigmoidRef(x[k]) - y[k]) / 12
				if !relClose(grad[k], want, 1e-12, 1e-15) {
					t.Errorf("d loss/d x at x=%v, y=%v: got %v, want %v", x[k], y[k], grad[k], want)
				}
			}
		})
	}
}

func TestMeanSquaredError(t *testing.T) {
	out := []float64{1, 2, 3, -1, 0.5, 4}
	lab := []float64{1.5, 2, 0, 1, 0.5, -4}
	per, shape, grad := runLoss(t, nn.MeanSquaredError{}, tensor.Shape{2, 3}, out, lab, identity)
	if !shape.Equal(tensor.Shape{2}) {
		t.Fatalf("per-example loss shape %v, want [2]", shape)
	}
	for i := range 2 {
		want := 0.0
		for j := range 3 {
			d := out[i*3+j] - lab[i*3+j]
			want += d * d / 3
		}
		if !relClose(per[i], want, 1e-14, 1e-15) {
			t.Errorf("example %d: mse %v, want %v", i, per[i], want)
		}
	}
	for k := range out {
		if want := 2 * (out[k] - lab[k]) / 6; !relClose(grad[k], want, 1e-14, 1e-15) {
			t.Errorf("d mse/d out %d = %v, want %v", k, grad[k], want)
		}
	}
	// a [B] output is already per example
	per, shape, _ = runLoss(t, nn.MeanSquaredError{}, tensor.Shape{3}, []float64{1, 2, 3}, []float64{0, 2, 5}, identity)
	if !shape.Equal(tensor.Shape{3}) || per[0] != 1 || per[1] != 0 || per[2] != 4 {
		t.Errorf("mse of a [3] output: %v %v, want [1 0 4] of shape [3]", per, shape)
	}
}

func TestMeanAbsoluteError(t *testing.T) {
	out := []float64{1, 2, 3, -1, 0.5, 4}
	lab := []float64{1.5, 2.25, 0, 1, 0.75, -4}
	per, shape, grad := runLoss(t, nn.MeanAbsoluteError{}, tensor.Shape{2, 3}, out, lab, identity)
	if !shape.Equal(tensor.Shape{2}) {
		t.Fatalf("per-example loss shape %v, want [2]", shape)
	}
	for i := range 2 {
		want := 0.0
		for j := range 3 {
			want += math.Abs(out[i*3+j]-lab[i*3+j]) / 3
		}
		if !relClose(per[i], want, 1e-14, 1e-15) {
			t.Errorf("example %d: mae %v, want %v", i, per[i], want)
		}
	}
	for k := range out {
		want := 1.0 / 6 // the mean over the batch's 6 values of sign(out - label)
		if out[k] < lab[k] {
			want = -want
		}
		if !relClose(grad[k], want, 1e-14, 1e-15) {
			t.Errorf("d mae/d out %d = %v, want %v", k, grad[k], want)
		}
	}
}

func TestLossByName(t *testing.T) {
	tests := []struct{ name, want string }{
		{"sparse_categorical_crossentropy", "sparse_categorical_crossentropy"},
		{"binary_crossentropy", "binary_crossentropy"},
		{"mse", "mse"},
		{"mean_squared_error", "mse"},
		{"mae", "mae"},
		{"mean_absolute_error", "mae"},
	}
	for _, tc := range tests {
		l, err := nn.LossByName(tc.name)
		if err != nil {
			t.Errorf("LossByName(%q): %v", tc.name, err)
			continue
		}
		if l.Name() != tc.want {
			t.Errorf("LossByName(%q).Name() = %q, want %q", tc.name, l.Name(), tc.want)
		}
	}
	if _, err := nn.LossByName("hinge"); err == nil || !strings.Contains(err.Error(), "hinge") {
		t.Errorf("LossByName(hinge): got %v, want an error naming it", err)
	}
	// label dtypes and shapes
	if l := (nn.SparseCategoricalCrossentropy{}); l.LabelType() != tensor.Int32 || !l.LabelShape(tensor.Shape{8, 10}).Equal(tensor.Shape{}) {
		t.Errorf("sparse CE labels: %v %v, want int32 []", l.LabelType(), l.LabelShape(tensor.Shape{8, 10}))
	}
	if l := (nn.BinaryCrossentropy{}); l.LabelType() != tensor.Float32 || !l.LabelShape(tensor.Shape{8, 3}).Equal(tensor.Shape{3}) {
		t.Errorf("binary CE labels: %v %v, want float32 [3]", l.LabelType(), l.LabelShape(tensor.Shape{8, 3}))
	}
}

func TestLogits(t *testing.T) {
	g := graph.New()
	x := g.Input("x", tensor.Float32, tensor.Shape{2, 3})
	for _, tc := range []struct {
		name   string
		out    *graph.Node
		want   *graph.Node
		wantOK bool
	}{
		{"softmax", graph.Softmax(x), x, true},
		{"sigmoid", graph.Sigmoid(x), x, true},
		{"relu", graph.Relu(x), nil, false},
	} {
		got, ok := nn.Logits(tc.out)
		want := tc.want
		if want == nil {
			want = tc.out
		}
		if got != want || ok != tc.wantOK {
			t.Errorf("%s: Logits = %v, %v; want %v, %v", tc.name, got, ok, want, tc.wantOK)
		}
	}
}
