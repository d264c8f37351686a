package train_test

import (
	"context"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/headroom-ml/headroom/data"
	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/step"
	"github.com/headroom-ml/headroom/tensor"
	"github.com/headroom-ml/headroom/train"
	"github.com/headroom-ml/headroom/train/checkpoint"
)

// goLike returns n bytes of a small Go-like language: keywords, names and
// braces in a pattern a model can learn a little of in a few steps.
func goLike(seed uint64, n int) []byte {
	rng := rand.New(rand.NewPCG(seed, 3))
	words := []string{"func ", "main", "() {\n", "\treturn ", "x", " := ", "if ", "err != nil", " {\n", "}\n", "for ", "i", "++", "\n"}
	var b []byte
	for len(b) < n {
		b = append(b, words[rng.IntN(len(words))]...)
	}
	return b[:n]
}

func textData(T int) *train.Text {
	b := goLike(1, 6000)
	return &train.Text{Name: "go-like", Train: b[:5000], Val: b[5000:], T: T, ValWindows: 8}
}

func smallGPT(T int) *nn.GPT {
	return &nn.GPT{Vocab: 256, Context: T, Dim: 16, Heads: 2, Blocks: 2, Hidden: 32}
}

func fitText(t *testing.T, cfg train.Config, txt *train.Text) (*train.Trainer, *train.History) {
	t.Helper()
	tr, err := train.New(cfg, train.OnText(txt))
	if err != nil {
		t.Fatal(err)
	}
	h, err := tr.Fit(context.Background())
	if err != nil {
		tr.Close()
		t.Fatal(err)
	}
	return tr, h
}

// TestFitTextLearnsAndMatchesPlan trains the gpt and the lstm (small) on
// text: the loss falls, the validation loss is measured, and the measured
// peak equals the plan, the text included.
func TestFitTextLearnsAndMatchesPlan(t *testing.T) {
	const T = 16
	for _, tc := range []struct {
		name  string
		model nn.Model
	}{{"gpt", smallGPT(T)}, {"lstm", &nn.LSTMLM{Vocab: 256, Context: T, Embed: 8, Units: 16}}} {
		t.Run(tc.name, func(t *testing.T) {
			txt := textData(T)
			cfg := train.Config{Model: tc.model, Batch: 8, Epochs: 2, Seed: 1, ClipNorm: 1, NoWatchdog: true}
			tr, h := fitText(t, cfg, txt)
			defer tr.Close()
			if want := int64(2 * txt.StepsPerEpoch(8)); h.Steps != want {
				t.Errorf("got %d steps, want %d (two epochs)", h.Steps, want)
			}
			if !(h.LastLoss < h.FirstLoss-0.5) {
				t.Errorf("loss %v -> %v, want it to fall by 0.5", h.FirstLoss, h.LastLoss)
			}
			if math.IsNaN(h.ValLoss) || h.ValLoss <= 0 || h.ValLoss != h.Epochs[1].ValLoss {
				t.Errorf("validation loss %v (epochs %v), want the last epoch's, positive", h.ValLoss, h.Epochs)
			}
			if h.MeasuredPeak != tr.Planned {
				t.Errorf("measured peak %d, planned %d", h.MeasuredPeak, tr.Planned)
			}
			rp, err := train.PlanFor(cfg, train.OnText(txt))
			if err != nil {
				t.Fatal(err)
			}
			if rp.Peak != tr.Planned || rp.DataBytes != int64(len(txt.Train)+len(txt.Val)+63)&^63 {
				t.Errorf("PlanFor plans %d B with %d B of text, the trainer %d B", rp.Peak, rp.DataBytes, tr.Planned)
			}
		})
	}
}

// TestFitTextResumesExactly: the windows of step s are a function of the
// seed and s, so a run resumed from a checkpoint taken mid-epoch ends
// where an uninterrupted one does, bit for bit.
func TestFitTextResumesExactly(t *testing.T) {
	const T = 16
	txt := textData(T)
	run := func(steps int64, dir string, resume bool) *train.History {
		cfg := train.Config{Model: smallGPT(T), Batch: 4, Epochs: 1, Seed: 5, MaxSteps: steps, ClipNorm: 1, NoWatchdog: true,
			CheckpointDir: dir, Resume: resume, CheckpointEvery: 3}
		tr, h := fitText(t, cfg, txt)
		tr.Close()
		return h
	}
	a := run(7, "", false)
	dir := t.TempDir()
	run(3, dir, false)
	b := run(7, dir, true)
	if b.ResumedFrom == "" {
		t.Fatal("the second run did not resume")
	}
	if math.Float64bits(a.LastLoss) != math.Float64bits(b.LastLoss) || math.Float64bits(a.ValLoss) != math.Float64bits(b.ValLoss) {
		t.Errorf("resumed run: loss %v, validation %v; uninterrupted %v, %v", b.LastLoss, b.ValLoss, a.LastLoss, a.ValLoss)
	}
}

// TestFitTextAccumulates: micro-batches of the same windows train as the
// whole batch does, within float32 rounding of the sums.
func TestFitTextAccumulates(t *testing.T) {
	const T = 16
	txt := textData(T)
	var losses []float64
	for _, k := range []int{1, 4} {
		cfg := train.Config{Model: smallGPT(T), Batch: 8, Epochs: 1, Seed: 2, MaxSteps: 6, ClipNorm: 1, Accumulate: k, NoWatchdog: true}
		tr, h := fitText(t, cfg, txt)
		if h.MeasuredPeak != tr.Planned {
			t.Errorf("accumulate %d: measured peak %d, planned %d", k, h.MeasuredPeak, tr.Planned)
		}
		tr.Close()
		losses = append(losses, h.LastLoss)
	}
	if d := math.Abs(losses[1]-losses[0]) / losses[0]; d > 1e-5 {
		t.Errorf("loss after 6 steps: %v in one batch, %v in 4 micro-batches (relative %.2g), want within 1e-5", losses[0], losses[1], d)
	}
}

// TestSaveModelOfText: a language model's file is a model file like any
// other: it names the model, its window and vocabulary for `headroom
// generate`, beside every weight, and loads back into the same model.
func TestSaveModelOfText(t *testing.T) {
	const T = 16
	txt := textData(T)
	cfg := train.Config{Model: smallGPT(T), Batch: 4, Epochs: 1, MaxSteps: 1, NoWatchdog: true}
	tr, _ := fitText(t, cfg, txt)
	defer tr.Close()
	path := filepath.Join(t.TempDir(), "gpt.safetensors")
	reg := &train.Registered{Name: "gpt", Input: tensor.Shape{T}, Classes: 256}
	if err := tr.SaveModel(path, data.Preprocessing{Format: "text", Data: txt.Name}, reg); err != nil {
		t.Fatal(err)
	}
	mf, err := train.LoadModel(path)
	if err != nil {
		t.Fatal(err)
	}
	if r := mf.Registered; r == nil || r.Name != "gpt" || !r.Input.Equal(tensor.Shape{T}) || r.Classes != 256 || mf.Preprocessing.Format != "text" {
		t.Errorf("the file names %+v (preprocessing %+v), want gpt [16] of 256", r, mf.Preprocessing)
	}
	if _, ok := mf.Weight("block0/attention/query/kernel"); !ok {
		t.Errorf("the file has no block0/attention/query/kernel")
	}
	if _, ok := mf.Model.(*nn.GPT); !ok {
		t.Errorf("the file loads as %T, want the *nn.GPT it was trained as", mf.Model)
	}
}

// TestLoadModelOfLegacyText: a file a language model was saved in before
// model files held them (the headroom.seq.* keys) loads as a registered
// model.
func TestLoadModelOfLegacyText(t *testing.T) {
	m, err := nn.NewModel("lstm", tensor.Shape{16}, 256)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := step.Describe(step.Config{Model: m})
	if err != nil {
		t.Fatal(err)
	}
	var entries []checkpoint.Entry
	for _, w := range spec.Weights {
		entries = append(entries, checkpoint.Entry{Name: w.Name, Tensor: tensor.New(w.DType, w.Shape)})
	}
	path := filepath.Join(t.TempDir(), "lstm.safetensors")
	meta := map[string]string{train.KeySeqModel: "lstm", train.KeySeqContext: "16", train.KeySeqVocab: "256"}
	if err := checkpoint.Save(path, entries, meta); err != nil {
		t.Fatal(err)
	}
	mf, err := train.LoadModel(path)
	if err != nil {
		t.Fatal(err)
	}
	if r := mf.Registered; r == nil || r.Name != "lstm" || !r.Input.Equal(tensor.Shape{16}) || r.Classes != 256 {
		t.Errorf("the legacy file reads as %+v, want lstm [16] of 256", r)
	}
}
