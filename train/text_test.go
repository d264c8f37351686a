package train_test

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/headroom-ml/headroom/nn"
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
	tr, err := train.NewText(cfg, txt)
	if err != nil {
		t.Fatal(err)
	}
	h, err := tr.FitText()
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
			_, totals, err := train.PlanForText(cfg, txt)
			if err != nil {
				t.Fatal(err)
			}
			var sum int64
			for _, b := range totals {
				sum += b
			}
			if sum != tr.Planned {
				t.Errorf("PlanForText plans %d B, the trainer %d B", sum, tr.Planned)
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

// TestSaveTextRecordsTheModel: the saved file names the model, its window
// and vocabulary for `headroom generate`, beside every weight.
func TestSaveTextRecordsTheModel(t *testing.T) {
	const T = 16
	txt := textData(T)
	cfg := train.Config{Model: smallGPT(T), Batch: 4, Epochs: 1, MaxSteps: 1, NoWatchdog: true}
	tr, _ := fitText(t, cfg, txt)
	defer tr.Close()
	path := filepath.Join(t.TempDir(), "gpt.safetensors")
	if err := tr.SaveText(path, "gpt", 256); err != nil {
		t.Fatal(err)
	}
	f, err := checkpoint.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{train.KeySeqModel: "gpt", train.KeySeqContext: "16", train.KeySeqVocab: "256"} {
		if got := f.Meta[k]; got != want {
			t.Errorf("metadata %s = %q, want %q", k, got, want)
		}
	}
	if _, ok := f.Get("block0/attention/query/kernel"); !ok {
		t.Errorf("the file has no block0/attention/query/kernel")
	}
}
