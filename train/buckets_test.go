package train_test

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/optim"
	"github.com/headroom-ml/headroom/train"
)

// lines returns n lines of Go-like words, each of at most max bytes with
// its newline (and at least 2).
func lines(seed uint64, n, max int) []byte {
	rng := rand.New(rand.NewPCG(seed, 5))
	words := []string{"func", "main", "return", "x", ":=", "if", "err", "nil", "for", "i", "{", "}"}
	var b strings.Builder
	for range n {
		var l []byte
		want := 1 + rng.IntN(max-1)
		for len(l) < want {
			l = append(l, words[rng.IntN(len(words))]...)
			l = append(l, ' ')
		}
		b.Write(l[:want])
		b.WriteByte('\n')
	}
	return []byte(b.String())
}

// bucketText is lines for a bucketed run.
func bucketText(buckets []int, max int) *train.Text {
	tr, val := lines(1, 300, max), lines(2, 40, max)
	return &train.Text{Name: "lines", Train: tr, Val: val, Buckets: buckets}
}

// TestBucketsPaddingChangesNothing: lines of at most 8 tokens, run in a
// bucket of 8 and, padded, in a bucket of 32 (the same model, context 32):
// the validation loss before training and the training that follows (loss
// and weights) are the same, to rounding.
func TestBucketsPaddingChangesNothing(t *testing.T) {
	run := func(buckets []int, epochs int) (*train.History, []float64) {
		cfg := train.Config{Model: smallGPT(32), Optimizer: &optim.SGD{Momentum: 0.9}, Schedule: optim.Constant(0.1), Epochs: epochs, Batch: 8, Seed: 4}
		tr, h := fitText(t, cfg, bucketText(buckets, 9))
		defer tr.Close()
		return h, paramValues(tr)
	}
	for _, epochs := range []int{0, 2} {
		short, ws := run([]int{8, 32}, epochs)
		long, wl := run([]int{32}, epochs)
		rel := math.Abs(short.ValLoss-long.ValLoss) / long.ValLoss
		t.Logf("%d epochs: validation loss %.9g in a bucket of 8, %.9g padded to 32 (%.2g relative); steps %d and %d", epochs, short.ValLoss, long.ValLoss, rel, short.Steps, long.Steps)
		if math.IsNaN(short.ValLoss) || rel > 1e-6 {
			t.Errorf("%d epochs: validation loss %v in a bucket of 8, %v padded to 32: want the same to 1e-6", epochs, short.ValLoss, long.ValLoss)
		}
		if epochs == 0 {
			continue
		}
		if short.Steps != long.Steps || short.Steps == 0 {
			t.Fatalf("steps %d and %d: want the same batches", short.Steps, long.Steps)
		}
		if rel := math.Abs(short.LastLoss-long.LastLoss) / long.LastLoss; rel > 1e-5 {
			t.Errorf("final loss %v in a bucket of 8, %v padded: %.2g relative, want <= 1e-5", short.LastLoss, long.LastLoss, rel)
		}
		var diff, norm float64
		for i := range ws {
			diff += (ws[i] - wl[i]) * (ws[i] - wl[i])
			norm += wl[i] * wl[i]
		}
		if rel := math.Sqrt(diff / norm); rel > 1e-5 {
			t.Errorf("weights differ by %.2g relative, want <= 1e-5: the padding changed the gradients", rel)
		}
	}
}

// TestBucketsArePlanned: a run over lines of 1 to 60 tokens in buckets of
// 16, 32 and 64 compiles a step per bucket in one reservation sized by the
// largest: the measured peak is the plan, the ledger does not grow, the
// loss falls; the gpt and the lstm both.
func TestBucketsArePlanned(t *testing.T) {
	for _, m := range []nn.Model{smallGPT(64), &nn.LSTMLM{Vocab: 256, Context: 64, Embed: 16, Units: 32}} {
		cfg := train.Config{Model: m, Epochs: 3, Batch: 16, Seed: 2, Schedule: optim.Constant(3e-3)}
		tr, h := fitText(t, cfg, bucketText([]int{16, 32, 64}, 61))
		t.Logf("%T: planned %d, measured %d, loss %.4f -> %.4f, val %.4f, %d steps", m, tr.Planned, h.MeasuredPeak, h.FirstLoss, h.LastLoss, h.ValLoss, h.Steps)
		if h.MeasuredPeak != tr.Planned || h.LedgerGrowth != 0 {
			t.Errorf("%T: measured %d B, planned %d B, ledger growth %d B", m, h.MeasuredPeak, tr.Planned, h.LedgerGrowth)
		}
		if !(h.Epochs[len(h.Epochs)-1].Loss < h.Epochs[0].Loss) || math.IsNaN(h.ValLoss) {
			t.Errorf("%T: epoch losses %v, validation %v: want the loss to fall and a validation loss", m, h.Epochs, h.ValLoss)
		}
		tr.Close()
	}
}
