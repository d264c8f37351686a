package onnx

import (
	"bytes"
	"context"
	"os"
	"testing"

	"github.com/headroom-ml/headroom/data"
	"github.com/headroom-ml/headroom/datasets"
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/tensor"
	"github.com/headroom-ml/headroom/train"
)

// TestFashionMNISTAcceptance is the acceptance check of issue 17, run on
// demand (HEADROOM_ONNX_FASHION=1; it trains for an epoch, about a minute
// on 2 cores): the reference cnn trained one epoch on Fashion-MNIST,
// exported, run in onnxruntime on the 10,000 test images, agrees with
// headroom's own outputs (max |diff| <= 1e-4, the same argmax everywhere),
// and its int8 export keeps the test accuracy within 0.01 at <= 0.3x the
// file size.
func TestFashionMNISTAcceptance(t *testing.T) {
	if os.Getenv("HEADROOM_ONNX_FASHION") != "1" {
		t.Skip("set HEADROOM_ONNX_FASHION=1 to train the cnn on Fashion-MNIST and check its export")
	}
	ortSetup(t)
	trainSet, testSet, err := datasets.FashionMNIST("")
	if err != nil {
		t.Skip(err)
	}
	model := mustModel(t, "cnn", trainSet.Shape, 10)
	tr, err := train.New(train.Config{Model: model, Epochs: 1, Batch: 128, Seed: 1, Threads: 2, NoWatchdog: true}, train.InMemory(trainSet, testSet))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if _, err := tr.Fit(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := predictExamples(t, train.PredictConfig{Model: model, Weights: tr.Weight, Batch: 128, Threads: 2}, testSet) // headroom's logits, [10000 * 10]
	weights := map[string]tensor.Tensor{}
	for _, v := range tr.Engine().Variables() {
		weights[v.Name] = v.Tensor()
	}

	// the inference graph, built at the calibration batch
	const calib = 500
	g := graph.New()
	x := g.Input("x", tensor.Float32, append(tensor.Shape{calib}, trainSet.Shape...))
	out := model.Forward(nn.NewContext(g, false, 0), x)
	m := Model{Graph: g, Inputs: []*graph.Node{x}, Outputs: []Output{{Name: "logits", Node: out}}, Weights: weightsOf(weights)}
	d := trainSet.Shape.Size()
	ranges, err := Calibrate(m, 2, func(i int, in map[string]tensor.Tensor) error {
		dst := in["x"].Float32s()
		for j, p := range trainSet.Pixels[i*calib*d : (i+1)*calib*d] {
			dst[j] = float32(p) * trainSet.Scale
		}
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

	images := tensor.New(tensor.Float32, append(tensor.Shape{testSet.N}, testSet.Shape...))
	for j, p := range testSet.Pixels {
		images.Float32s()[j] = float32(p) * testSet.Scale
	}
	wantT := tensor.New(tensor.Float32, tensor.Shape{testSet.N, 10})
	for i, v := range want {
		wantT.Float32s()[i] = float32(v)
	}
	feeds := map[string]tensor.Tensor{"x": images}
	gotF := runORT(t, f32.Bytes(), feeds, 2)
	gotQ := runORT(t, i8.Bytes(), feeds, 2)
	diff, agree := maxAbsDiff(wantT, gotF.Tensors[0]), argmaxAgreement(wantT, gotF.Tensors[0])
	accH, accF, accQ := accuracy(wantT, testSet.Labels), accuracy(gotF.Tensors[0], testSet.Labels), accuracy(gotQ.Tensors[0], testSet.Labels)
	ratio := float64(i8.Len()) / float64(f32.Len())
	t.Logf("float: %d B, max |onnxruntime - headroom| %.3g, argmax agreement %.4f; test accuracy headroom %.4f, onnxruntime %.4f (%.0f ms per 10,000 images, 1 thread)",
		f32.Len(), diff, agree, accH, accF, gotF.MsPerRun)
	t.Logf("int8: %d B (%.3fx), test accuracy %.4f (%+.4f), argmax agreement with float %.4f (%.0f ms per 10,000 images, 1 thread)",
		i8.Len(), ratio, accQ, accQ-accF, argmaxAgreement(wantT, gotQ.Tensors[0]), gotQ.MsPerRun)
	if !(diff <= 1e-4) || agree != 1 {
		t.Errorf("float export: max |diff| %g (want <= 1e-4), argmax agreement %v (want 1)", diff, agree)
	}
	if accQ < accF-0.01 || ratio > 0.3 {
		t.Errorf("int8 export: accuracy %.4f vs float %.4f (want within 0.01), size %.3fx (want <= 0.3x)", accQ, accF, ratio)
	}
}

func accuracy(logits tensor.Tensor, labels []int32) float64 {
	c := logits.Shape()[1]
	right := 0
	for i, l := range labels {
		if argmax(logits, i*c, c) == int(l) {
			right++
		}
	}
	return float64(right) / float64(len(labels))
}

// predictExamples returns a predictor's outputs on e's examples, in order.
func predictExamples(t *testing.T, cfg train.PredictConfig, e *data.Examples) []float64 {
	t.Helper()
	x := tensor.New(tensor.Float32, append(tensor.Shape{e.N}, e.Shape...))
	all := make([]int, e.N)
	for i := range all {
		all[i] = i
	}
	e.Fill(x, all)
	y := tensor.New(tensor.Int32, tensor.Shape{e.N})
	ds, err := data.FromTensors(x, y)
	if err != nil {
		t.Fatal(err)
	}
	p, err := train.NewPredictor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var out []float64
	err = p.Predict(context.Background(), data.Batches(ds, cfg.Batch, false), func(o tensor.Tensor) error {
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
