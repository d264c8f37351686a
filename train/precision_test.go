package train_test

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/step"
	"github.com/headroom-ml/headroom/tensor"
	"github.com/headroom-ml/headroom/train"
)

// TestMixedPrecisionHalvesActivations: the reference CNN at batch 128 on
// 28x28 images keeps at most 0.55x the float32 plan's activation bytes
// under a 16-bit policy whose layout the trainer keeps, and a policy never
// plans more than float32: mixed_float16, whose loss scaling keeps every
// gradient until the overflow check, plans more than float32 here, so the
// trainer keeps float32's layout and says so.
func TestMixedPrecisionHalvesActivations(t *testing.T) {
	cnn, err := nn.ModelByName("cnn", tensor.Shape{28, 28, 1}, 10)
	if err != nil {
		t.Fatal(err)
	}
	plan := func(precision step.Precision) (act, total int64, choice train.StorageChoice, note string) {
		cfg := train.Config{Model: cnn, Epochs: 1, Batch: 128, Precision: precision}
		rp, err := train.PlanFor(cfg, described(tensor.Shape{28, 28, 1}, 1280, 10))
		if err != nil {
			t.Fatal(err)
		}
		return rp.Step.Totals[mem.Activation], rp.Peak, rp.Storage, rp.StorageNote
	}
	f32, f32Total, _, _ := plan(step.Float32)
	for _, c := range []struct {
		precision step.Precision
		want      train.StorageChoice
	}{{step.MixedBFloat16, train.StorageLow}, {step.MixedFloat16, train.StorageFloat32}} {
		low, total, choice, note := plan(c.precision)
		t.Logf("%s: activations %s vs float32 %s (%.3fx); run %s vs %s; %v %s", c.precision, mem.FormatBytes(low), mem.FormatBytes(f32),
			float64(low)/float64(f32), mem.FormatBytes(total), mem.FormatBytes(f32Total), choice, note)
		if total > f32Total {
			t.Errorf("%s plans %d B, more than float32's %d B", c.precision, total, f32Total)
		}
		if choice != c.want {
			t.Errorf("%s: kept %v, want %v", c.precision, choice, c.want)
		}
		if choice == train.StorageLow && float64(low) > 0.55*float64(f32) {
			t.Errorf("%s keeps %d B of activations, more than 0.55x float32's %d B", c.precision, low, f32)
		}
		if choice != train.StorageLow && !strings.Contains(note, "keeping") {
			t.Errorf("%s: note %q does not say what it keeps", c.precision, note)
		}
	}
}

// TestMixedPrecisionPeakNotAboveFloat32: 16-bit saved activations must not
// cost more memory than they save. The backward pass widens each 16-bit
// layer output once for every rule that reads it (relu's gradient reads its
// output, max pooling's its input: the same value); two copies of it made
// the reference CNN's mixed_bfloat16 step peak 77.1 MB against float32's 71.6.
func TestMixedPrecisionPeakNotAboveFloat32(t *testing.T) {
	cnn, err := nn.ModelByName("cnn", tensor.Shape{28, 28, 1}, 10)
	if err != nil {
		t.Fatal(err)
	}
	peak := func(precision step.Precision) int64 {
		rp, err := train.PlanFor(train.Config{Model: cnn, Epochs: 1, Batch: 128, Precision: precision}, described(tensor.Shape{28, 28, 1}, 1280, 10))
		if err != nil {
			t.Fatal(err)
		}
		return rp.Step.Peak
	}
	f32, bf16 := peak(step.Float32), peak(step.MixedBFloat16)
	t.Logf("peak: mixed_bfloat16 %s, float32 %s", mem.FormatBytes(bf16), mem.FormatBytes(f32))
	if bf16 > f32 {
		t.Errorf("mixed_bfloat16 plans a peak of %d B, above float32's %d B", bf16, f32)
	}
}

func TestMixedPrecisionTrains(t *testing.T) {
	data := blobs(4, 1000, 8, 4)
	for _, p := range []step.Precision{step.MixedBFloat16, step.MixedFloat16} {
		t.Run(p.String(), func(t *testing.T) {
			cfg := train.Config{Model: mlp(), Epochs: 5, Batch: 64, Seed: 3, Precision: p}
			tr, h := fitOn(t, cfg, train.InMemory(data, data.Slice("val", 0, 300)))
			defer tr.Close()
			acc := h.Epochs[len(h.Epochs)-1].ValAccuracy
			if acc < 0.9 {
				t.Errorf("accuracy %.3f under %s, want >= 0.9", acc, p)
			}
			if h.MeasuredPeak != tr.Planned {
				t.Errorf("measured %d, planned %d", h.MeasuredPeak, tr.Planned)
			}
			if p == step.MixedFloat16 && h.SkippedSteps != 0 {
				t.Errorf("%d steps skipped on well-scaled data", h.SkippedSteps)
			}
		})
	}
}

// TestFloat16OverflowSkipsTheStep: inputs large enough that a layer output
// overflows float16 make every gradient non-finite; the step must change no
// weight, count as skipped, and halve the loss scale.
func TestFloat16OverflowSkipsTheStep(t *testing.T) {
	data := blobs(5, 64, 8, 4)
	for i := range data.Floats {
		data.Floats[i] *= 1e5 // dense(32) outputs far beyond float16's 65504
	}
	cfg := train.Config{Model: mlp(), Epochs: 1, Batch: 64, Seed: 3, Precision: step.MixedFloat16}
	tr, err := train.New(cfg, train.InMemory(data, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	before := map[string][]float64{}
	for _, v := range tr.Engine().Variables() {
		x := v.Tensor()
		for i := 0; i < x.Len(); i++ {
			before[v.Name] = append(before[v.Name], x.Float64At(i))
		}
	}
	h, err := tr.Fit(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if h.SkippedSteps != 1 || h.LossScale != 65536/2 {
		t.Errorf("skipped %d steps with loss scale %v, want 1 and 32768", h.SkippedSteps, h.LossScale)
	}
	for _, v := range tr.Engine().Variables() {
		x := v.Tensor()
		for i := 0; i < x.Len(); i++ {
			got := x.Float64At(i)
			if math.IsNaN(got) || got != before[v.Name][i] {
				t.Fatalf("%s[%d] changed from %v to %v in a skipped step", v.Name, i, before[v.Name][i], got)
			}
		}
	}
}

// TestDescribeWhenNothingFits: with no candidate under the budget, the
// report does not call the smallest one a choice.
func TestDescribeWhenNothingFits(t *testing.T) {
	none := []train.Candidate{{Accumulate: 4, MicroBatch: 8, Precision: step.Float32, Peak: 2 << 20}, {Accumulate: 1, MicroBatch: 32, Precision: step.Float32, Peak: 4 << 20}}
	if got := train.Describe(none); strings.Contains(got, "chose") || !strings.Contains(got, "no plan that fits") || strings.Count(got, "does not fit") != 2 {
		t.Errorf("Describe with nothing that fits:\n%s", got)
	}
	some := []train.Candidate{{Accumulate: 1, MicroBatch: 32, Precision: step.Float32, Peak: 1 << 20, Fits: true}, none[0]}
	if got := train.Describe(some); !strings.HasPrefix(got, "fit-to-budget chose: 1 x micro-batch 32") || !strings.Contains(got, "rejected: 4 x micro-batch 8") {
		t.Errorf("Describe with a choice:\n%s", got)
	}
}
