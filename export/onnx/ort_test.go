package onnx

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/headroom-ml/headroom/tensor"
)

// The graphs are exported at one batch size and compared at another: the
// exported model must not depend on the batch it was built at.
const (
	exportBatch = 3
	refBatch    = 5
)

// exported builds tm at exportBatch with random weights and writes it.
func exported(t *testing.T, tm testModel, rng *rand.Rand, opt Options) ([]byte, map[string]tensor.Tensor) {
	t.Helper()
	g, ins, outs := tm.build(exportBatch)
	weights := randomWeights(g, rng)
	var buf bytes.Buffer
	if err := Write(&buf, Model{Graph: g, Inputs: ins, Outputs: outs, Weights: weightsOf(weights)}, opt); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), weights
}

// reference builds tm at batch b with weights and returns the model, random
// feeds and headroom's outputs for them.
func reference(t *testing.T, tm testModel, b int, weights map[string]tensor.Tensor, rng *rand.Rand) (Model, map[string]tensor.Tensor, []tensor.Tensor) {
	t.Helper()
	g, ins, outs := tm.build(b)
	m := Model{Graph: g, Inputs: ins, Outputs: outs, Weights: weightsOf(weights)}
	feeds := makeFeeds(tm, ins, rng)
	return m, feeds, headroomOutputs(t, m, feeds)
}

func TestOnnxRuntimeMatchesHeadroom(t *testing.T) {
	models := testModels(t)
	type tc struct {
		model testModel
		opset int
	}
	var cases []tc
	for _, tm := range models {
		cases = append(cases, tc{tm, 0})
	}
	for _, opset := range []int{18, MaxOpset} { // reductions take their axes as an input from 18
		cases = append(cases, tc{models[3], opset})
	}
	for _, c := range cases {
		name := c.model.name
		if c.opset != 0 {
			name += "/opset" + itoa(c.opset)
		}
		t.Run(name, func(t *testing.T) {
			ortSetup(t)
			rng := rand.New(rand.NewPCG(7, uint64(len(name))))
			model, weights := exported(t, c.model, rng, Options{Opset: c.opset})
			m, feeds, want := reference(t, c.model, refBatch, weights, rng)
			got := runORT(t, model, feeds, 0)
			if names := outputNames(m); !slices.Equal(got.Outputs, names) {
				t.Fatalf("onnxruntime outputs %v, want %v", got.Outputs, names)
			}
			for i, o := range m.Outputs {
				d := maxAbsDiff(want[i], got.Tensors[i])
				t.Logf("%s: %s vs headroom %s, max |diff| %.3g", o.Name, got.Tensors[i], want[i], d)
				if !(d <= 1e-4) {
					t.Errorf("output %s: max |onnxruntime - headroom| = %g, want <= 1e-4", o.Name, d)
				}
			}
		})
	}
}

func TestOnnxRuntimeInt8(t *testing.T) {
	const calibBatch, calibBatches, evalBatch = 16, 4, 64
	models := map[string]testModel{}
	for _, tm := range testModels(t) {
		models[tm.name] = tm
	}
	cases := []struct {
		name, model string
		opset       int
		int8        Int8Options
	}{
		{"mlp_softmax", "mlp_softmax", 0, Int8Options{}},
		{"cnn", "cnn", 0, Int8Options{}},
		{"conv_same", "conv_same", 0, Int8Options{}},
		{"cnn/opset21", "cnn", MaxOpset, Int8Options{}},
		{"cnn/int8_activations", "cnn", 0, Int8Options{SignedActivations: true}},
		{"mlp_softmax/reduce_range", "mlp_softmax", 0, Int8Options{ReduceRange: true}},
		{"gpt", "gpt", 0, Int8Options{}}, // agreement over every position's logits
		{"lstm", "lstm", 0, Int8Options{}},
	}
	for _, c := range cases {
		tm := models[c.model]
		t.Run(c.name, func(t *testing.T) {
			ortSetup(t)
			rng := rand.New(rand.NewPCG(11, uint64(len(tm.name))))
			g, ins, outs := tm.build(calibBatch)
			weights := randomWeights(g, rng)
			m := Model{Graph: g, Inputs: ins, Outputs: outs, Weights: weightsOf(weights)}
			ranges, err := Calibrate(m, calibBatches, func(_ int, in map[string]tensor.Tensor) error {
				for name, f := range makeFeeds(tm, ins, rng) {
					copy(in[name].Bytes(), f.Bytes())
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			var f32, i8 bytes.Buffer
			if err := Write(&f32, m, Options{Opset: c.opset}); err != nil {
				t.Fatal(err)
			}
			opt := c.int8
			opt.Ranges = ranges
			if err := Write(&i8, m, Options{Opset: c.opset, Int8: &opt}); err != nil {
				t.Fatal(err)
			}
			_, feeds, want := reference(t, tm, evalBatch, weights, rng)
			got := runORT(t, i8.Bytes(), feeds, 0)
			agree := argmaxAgreement(want[0], got.Tensors[0])
			t.Logf("int8 %d B (float %d B, %.3fx): argmax agreement with headroom's float outputs %.3f over %d examples, max |diff| %.3g",
				i8.Len(), f32.Len(), float64(i8.Len())/float64(f32.Len()), agree, evalBatch, maxAbsDiff(want[0], got.Tensors[0]))
			if agree < 0.9 {
				t.Errorf("argmax agreement %.3f, want >= 0.9", agree)
			}
		})
	}
}

func outputNames(m Model) []string {
	var out []string
	for _, o := range m.Outputs {
		out = append(out, o.Name)
	}
	return out
}

func itoa(v int) string { return string(rune('0'+v/10)) + string(rune('0'+v%10)) }
