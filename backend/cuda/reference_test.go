package cuda_test

import (
	"fmt"
	"testing"

	"github.com/headroom-ml/headroom/backend/cuda"
	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/data"
	"github.com/headroom-ml/headroom/datasets"
	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/step"
	"github.com/headroom-ml/headroom/tensor"
	"github.com/headroom-ml/headroom/train"
)

// The reference models as the command line trains them: mlp, cnn and
// resnet on 28×28 Fashion-MNIST images (batch 128), the unet on 32×32
// shapes (batch 32), the gpt and the lstm on windows of 128 bytes (batch
// 32), each under float32 and both 16-bit policies.
var (
	referenceModels = []string{"mlp", "cnn", "resnet", "unet", "gpt", "lstm"}
	policies        = []step.Precision{step.Float32, step.MixedBFloat16, step.MixedFloat16}
)

// referenceText is text for the language models' plans (only its size
// matters).
func referenceText(T int) *train.Text {
	b := make([]byte, 64<<10)
	for i := range b {
		b[i] = byte('a' + i*7%26)
	}
	return &train.Text{Name: "text", Train: b[:60<<10], Val: b[60<<10:], T: T}
}

// referencePrograms returns the programs a training run of model under
// prec would load on target t (its training, last-batch and evaluation
// steps).
func referencePrograms(t *testing.T, target *cuda.Target, model string, prec step.Precision) []*compile.Program {
	t.Helper()
	var d *train.Data
	var m nn.Model
	var err error
	batch := 128
	switch model {
	case "gpt", "lstm":
		batch = 32
		m, err = nn.NewModel(model, tensor.Shape{128}, 256)
		d = train.OnText(referenceText(128))
	case "unet":
		batch = 32
		m, err = nn.NewModel(model, tensor.Shape{32, 32, 1}, datasets.ShapeClasses)
		d = train.Described(data.SetInfo{Train: &data.Examples{Name: "shapes", Shape: tensor.Shape{32, 32, 1}, N: 2000,
			Classes: datasets.ShapeClasses, LabelShape: tensor.Shape{32, 32}}, HeldOut: 400})
	default:
		m, err = nn.NewModel(model, tensor.Shape{28, 28, 1}, 10)
		d = train.Described(data.SetInfo{Train: &data.Examples{Name: "fashion-mnist", Shape: tensor.Shape{28, 28, 1}, N: 60000, Classes: 10},
			HeldOut: 10000})
	}
	if err != nil {
		t.Fatal(err)
	}
	rp, err := train.PlanFor(train.Config{Model: m, Batch: batch, Precision: prec, Backend: target}, d)
	if err != nil {
		t.Fatalf("%s %s: %v", model, prec, err)
	}
	return rp.Programs
}

// runName names a model and policy in test names.
func runName(model string, prec step.Precision) string { return fmt.Sprintf("%s/%s", model, prec) }
