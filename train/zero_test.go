package train_test

import (
	"context"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/data"
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/optim"
	"github.com/headroom-ml/headroom/step"
	"github.com/headroom-ml/headroom/tensor"
	"github.com/headroom-ml/headroom/train"
)

// zeroModel has weights whose sizes do not all divide by two (the bias of
// 33): their blocks are zero-padded.
func zeroModel() *nn.Sequential {
	return &nn.Sequential{InputShape: tensor.Shape{8}, Layers: []nn.Layer{
		&nn.Dense{LayerName: "dense", Units: 33, Activation: "relu"},
		&nn.Dense{LayerName: "dense_1", Units: 16, Activation: "tanh"},
		&nn.Dense{LayerName: "dense_2", Units: 4},
	}}
}

// rankRun is what one rank of an in-process run ended with.
type rankRun struct {
	weights  []float64                // every parameter, whole (gathered under stage 3)
	live     [mem.NumCategories]int64 // the engine's ledger after training, by category
	planned  int64
	measured int64
	hist     *train.History
	storage  train.StorageChoice // what a 16-bit policy keeps
}

// fitRanksWith trains cfg on size goroutine ranks of one localGroup.
func fitRanksWith(t *testing.T, size int, cfg train.Config, d *data.Examples) []rankRun {
	t.Helper()
	group := newLocalGroup(size)
	out := make([]rankRun, size)
	errs := make([]error, size)
	var wg sync.WaitGroup
	for rank := range size {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := cfg
			r := newLocalRank(group, rank)
			defer close(r.q)
			c.Comm = r
			tr, err := train.New(c, train.InMemory(d, nil))
			if err != nil {
				errs[rank] = err
				group.abort() // the others end instead of waiting for this one
				return
			}
			defer tr.Close()
			h, err := tr.Fit(context.Background())
			if err != nil {
				errs[rank] = err
				group.abort()
				return
			}
			out[rank] = rankRun{weights: wholeParams(tr), live: tr.Engine().Ledger().Totals(),
				planned: h.PlannedPeak, measured: h.MeasuredPeak, hist: h}
			out[rank].storage, _ = tr.Storage()
		}()
	}
	wg.Wait()
	for rank, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", rank, err)
		}
	}
	return out
}

// wholeParams returns every parameter's whole value, in the engine's
// order (under stage 3 a gather every rank makes alike).
func wholeParams(tr *train.Trainer) []float64 {
	var w []float64
	for _, v := range tr.Engine().Variables() {
		if v.Role != graph.RoleParam {
			continue
		}
		x, ok := tr.Weight(v.Name)
		if !ok {
			return nil
		}
		for i := 0; i < x.Len(); i++ {
			w = append(w, x.Float64At(i))
		}
	}
	return w
}

func relDiff64(a, b []float64) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	var diff, norm float64
	for i := range b {
		diff += (a[i] - b[i]) * (a[i] - b[i])
		norm += b[i] * b[i]
	}
	return math.Sqrt(diff / max(norm, 1e-30))
}

// TestZeroStagesMatchOneProcess: under ZeRO stages 1, 2 and 3, two ranks
// end with the weights and the final loss of one process (within 1e-5),
// alike to the bit,
// with clipping, micro-batches, a bucket per gradient and loss scaling, on
// data with a partial last batch.
func TestZeroStagesMatchOneProcess(t *testing.T) {
	d := blobs(21, 1000, 8, 4) // 7 batches of 128 and one of 104
	cases := []struct {
		name string
		cfg  train.Config
		loss float64 // the most the final loss may differ, relative
	}{
		{"plain", train.Config{}, 1e-5},
		{"clipped", train.Config{ClipNorm: 0.5}, 1e-5},
		{"accumulate 2", train.Config{Accumulate: 2}, 1e-5},
		{"clipped, accumulate 2, a bucket per gradient", train.Config{ClipNorm: 0.5, Accumulate: 2, BucketBytes: 64}, 1e-5},
		// under float16 loss scaling the stages' graphs sum some gradients
		// (the biases') in another order, a last bit apart, which Adam
		// amplifies over the run's 16 steps to about 1.1e-5 of the loss
		// (the weights stay within 5e-6)
		{"mixed_float16", train.Config{Precision: step.MixedFloat16}, 5e-5},
	}
	for _, c := range cases {
		base := c.cfg
		base.Model, base.Optimizer, base.Epochs, base.Batch, base.Seed = zeroModel(), &optim.Adam{}, 2, 128, 9
		// the one process sums the batch in the ranks' micro-batches (each
		// rank's share in as many as it runs), so float32 rounds alike
		one := base
		one.Accumulate = 2 * max(1, base.Accumulate)
		single, sh := fit(t, one, d)
		want := wholeParams(single)
		storage, _ := single.Storage()
		single.Close()
		for stage := 1; stage <= 3; stage++ {
			cfg := base
			cfg.Zero = stage
			got := fitRanksWith(t, 2, cfg, d)
			for rank, r := range got {
				rel := relDiff64(r.weights, want)
				t.Logf("%s, stage %d, rank %d: relative difference %.3g", c.name, stage, rank, rel)
				if rel > 1e-5 {
					t.Errorf("%s, stage %d, rank %d: weights differ from one process by %.3g relative, want <= 1e-5", c.name, stage, rank, rel)
				}
				if r.planned != r.measured {
					t.Errorf("%s, stage %d, rank %d: planned %d B, measured %d B", c.name, stage, rank, r.planned, r.measured)
				}
				// the loss reported is the whole batch's, not this rank's share's;
				// a 16-bit policy may keep another layout on a rank's plan than on
				// one process's (train.StorageChoice), rounding differently
				most := c.loss
				if r.storage != storage {
					t.Logf("%s, stage %d: the ranks keep %v, one process %v", c.name, stage, r.storage, storage)
					most = 1e-4
				}
				if rel := math.Abs(r.hist.LastLoss-sh.LastLoss) / sh.LastLoss; rel > most {
					t.Errorf("%s, stage %d, rank %d: final loss %v, one process %v (%.3g relative), want <= %g", c.name, stage, rank, r.hist.LastLoss, sh.LastLoss, rel, most)
				}
				if a, b := r.hist.Epochs[1].Accuracy, sh.Epochs[1].Accuracy; math.Abs(a-b) > 0.002 {
					t.Errorf("%s, stage %d, rank %d: epoch 2's accuracy %v, one process's %v", c.name, stage, rank, a, b)
				}
			}
			for i := range got[0].weights {
				if math.Float64bits(got[0].weights[i]) != math.Float64bits(got[1].weights[i]) {
					t.Fatalf("%s, stage %d: ranks disagree at weight %d: %v vs %v", c.name, stage, i, got[0].weights[i], got[1].weights[i])
				}
			}
		}
	}
}

// TestZeroMemory: what each of two ranks holds of params, grads and
// optimizer state after training, against one process: stage 1 halves the
// optimizer state, stage 2 the gradient accumulators too (the run
// accumulates two micro-batches), stage 3 the parameters too; params +
// grads + optimizer state at most 0.55x from stage 2 on.
func TestZeroMemory(t *testing.T) {
	d := blobs(22, 512, 8, 4)
	model := func() *nn.Sequential { // weights large beside the arena
		return &nn.Sequential{InputShape: tensor.Shape{8}, Layers: []nn.Layer{
			&nn.Dense{LayerName: "dense", Units: 256, Activation: "relu"},
			&nn.Dense{LayerName: "dense_1", Units: 255, Activation: "relu"},
			&nn.Dense{LayerName: "dense_2", Units: 4},
		}}
	}
	base := train.Config{Model: model(), Optimizer: &optim.Adam{}, Epochs: 1, Batch: 64, Seed: 9, Accumulate: 2}
	one, _ := fit(t, base, d)
	ref := one.Engine().Ledger().Totals()
	one.Close()
	state := func(l [mem.NumCategories]int64) int64 { return l[mem.Param] + l[mem.Grad] + l[mem.OptState] }
	for _, tc := range []struct {
		stage                int
		param, grad, opt, pg float64 // the most each may be, as a fraction of one process's
	}{
		{1, 1, 1, 0.51, 1},
		{2, 1, 0.51, 0.51, 0.55},
		{3, 0.51, 0.51, 0.51, 0.55},
	} {
		cfg := base
		cfg.Zero = tc.stage
		for rank, r := range fitRanksWith(t, 2, cfg, d) {
			frac := func(c mem.Category) float64 { return float64(r.live[c]) / float64(ref[c]) }
			all := float64(state(r.live)) / float64(state(ref))
			t.Logf("stage %d, rank %d: params %.3fx, grads %.3fx, optimizer state %.3fx, together %.3fx one process's",
				tc.stage, rank, frac(mem.Param), frac(mem.Grad), frac(mem.OptState), all)
			for _, x := range []struct {
				what      string
				got, most float64
			}{{"params", frac(mem.Param), tc.param}, {"grads", frac(mem.Grad), tc.grad},
				{"optimizer state", frac(mem.OptState), tc.opt}, {"params + grads + optimizer state", all, tc.pg}} {
				if x.got > x.most {
					t.Errorf("stage %d, rank %d: %s %.3fx one process's, want <= %.2f", tc.stage, rank, x.what, x.got, x.most)
				}
			}
			if r.planned != r.measured {
				t.Errorf("stage %d, rank %d: planned %d B, measured %d B", tc.stage, rank, r.planned, r.measured)
			}
		}
	}
}

// TestZero3GathersPlanned: under stage 3 each layer's parameters are
// gathered into arena buffers (owner gather/<weight>) before its forward
// and, where its backward reads them (a kernel whose layer passes a
// gradient on, not a bias, not the first layer's kernel), again before its
// backward, each freed after its layer's last read; the next layer's
// gather starts before this layer's compute.
func TestZero3GathersPlanned(t *testing.T) {
	cfg := train.Config{Model: zeroModel(), Optimizer: &optim.Adam{}, Epochs: 1, Batch: 128, Seed: 9, Zero: 3}
	cfg.Comm = newLocalRank(newLocalGroup(2), 0)
	rp, err := train.PlanFor(cfg, described(tensor.Shape{8}, 1000, 4))
	if err != nil {
		t.Fatal(err)
	}
	p := rp.Step
	gathers := map[string][]compile.Buffer{}
	for _, b := range p.Buffers {
		if b.Kind == compile.KindArena && strings.HasPrefix(b.Owner, "gather/") && strings.HasSuffix(b.Owner, "/all_gather_start") {
			w := strings.TrimSuffix(strings.TrimPrefix(b.Owner, "gather/"), "/all_gather_start")
			gathers[w] = append(gathers[w], b)
		}
		if b.Kind == compile.KindVariable && b.Category == mem.Param && b.Shape.Rank() != 1 {
			t.Errorf("parameter %s is %v: want this process's block of it (a vector)", b.Name, b.Shape)
		}
	}
	for w, want := range map[string]int{"dense/kernel": 1, "dense/bias": 1, "dense_1/kernel": 2, "dense_1/bias": 1, "dense_2/kernel": 2, "dense_2/bias": 1} {
		bs := gathers[w]
		if len(bs) != want {
			t.Errorf("%s is gathered into %d buffers, want %d", w, len(bs), want)
			continue
		}
		if want == 1 {
			continue
		}
		if bs[0].End >= bs[1].Start {
			t.Errorf("%s: the forward's gather lives [%d, %d], the backward's from %d: want the first freed before the second", w, bs[0].Start, bs[0].End, bs[1].Start)
		}
	}
	// prefetch: dense_1's forward gather starts before dense's matmul runs
	matmul := -1
	for _, b := range p.Buffers {
		if b.Kind == compile.KindArena && b.Owner == "dense/matmul" && (matmul < 0 || b.Start < matmul) {
			matmul = b.Start
		}
	}
	if g := gathers["dense_1/kernel"]; len(g) > 0 && (matmul < 0 || g[0].Start > matmul) {
		t.Errorf("dense_1/kernel's gather starts at %d, dense's matmul runs at %d: want the gather first (prefetched)", g[0].Start, matmul)
	}
}

// TestZeroCheckpointResumes: a stage 2 or 3 run of two ranks writes
// sharded checkpoints (a part per rank, one index, no single file); two
// ranks resumed from one continue bit for bit as the uninterrupted run, and
// one process and three ranks resume from it too (resharding its blocks),
// ending within 1e-5 of the two ranks; two ranks also resume from one
// process's single-file checkpoint.
func TestZeroCheckpointResumes(t *testing.T) {
	d := blobs(23, 480, 8, 4)
	for _, stage := range []int{2, 3} {
		cfg := func(epochs int, dir string, resume bool) train.Config {
			return train.Config{Model: zeroModel(), Optimizer: &optim.Adam{}, Epochs: epochs, Batch: 96, Seed: 9, ClipNorm: 1,
				Zero: stage, CheckpointDir: dir, Resume: resume}
		}
		straight := fitRanksWith(t, 2, cfg(2, t.TempDir(), false), d)
		epoch1 := func() string { // a directory with the two ranks' checkpoint of epoch 1
			dir := t.TempDir()
			fitRanksWith(t, 2, cfg(1, dir, false), d)
			return dir
		}
		dir := epoch1()
		parts, _ := filepath.Glob(filepath.Join(dir, "ckpt-*-of-00002.safetensors"))
		index, _ := filepath.Glob(filepath.Join(dir, "*.index.json"))
		single, _ := filepath.Glob(filepath.Join(dir, "ckpt-??????????.safetensors"))
		if len(parts) != 2 || len(index) != 1 || len(single) != 0 {
			t.Fatalf("stage %d: the checkpoint is %v, %v, %v: want two parts and an index", stage, parts, index, single)
		}
		resumed := fitRanksWith(t, 2, cfg(2, dir, true), d)
		for rank := range resumed {
			for i := range straight[rank].weights {
				if math.Float64bits(straight[rank].weights[i]) != math.Float64bits(resumed[rank].weights[i]) {
					t.Fatalf("stage %d, rank %d, weight %d: %v resumed, %v straight", stage, rank, i, resumed[rank].weights[i], straight[rank].weights[i])
				}
			}
			if resumed[rank].hist.LastLoss != straight[rank].hist.LastLoss {
				t.Errorf("stage %d, rank %d: final loss %v resumed, %v straight", stage, rank, resumed[rank].hist.LastLoss, straight[rank].hist.LastLoss)
			}
		}
		one := cfg(2, epoch1(), true)
		one.Zero = 0
		tr, h := fit(t, one, d)
		if h.StartEpoch != 1 {
			t.Errorf("stage %d: one process resumed at epoch %d, want 1", stage, h.StartEpoch)
		}
		if rel := relDiff64(wholeParams(tr), straight[0].weights); rel > 1e-5 {
			t.Errorf("stage %d: one process resumed from two ranks' checkpoint ends %.3g from them, want <= 1e-5", stage, rel)
		}
		if rel := math.Abs(h.LastLoss-straight[0].hist.LastLoss) / straight[0].hist.LastLoss; rel > 1e-5 {
			t.Errorf("stage %d: one process resumed ends with loss %v, two ranks %v", stage, h.LastLoss, straight[0].hist.LastLoss)
		}
		tr.Close()
		three := fitRanksWith(t, 3, cfg(2, epoch1(), true), d)
		if rel := relDiff64(three[0].weights, straight[0].weights); rel > 1e-5 {
			t.Errorf("stage %d: three ranks resumed from two ranks' checkpoint end %.3g from them, want <= 1e-5", stage, rel)
		}
		// and back: two ranks from one process's single file
		dir1 := t.TempDir()
		c1 := cfg(1, dir1, false)
		c1.Zero = 0
		tr1, _ := fit(t, c1, d)
		tr1.Close()
		from1 := fitRanksWith(t, 2, cfg(2, dir1, true), d)
		if rel := relDiff64(from1[0].weights, straight[0].weights); rel > 1e-5 {
			t.Errorf("stage %d: two ranks resumed from one process's checkpoint end %.3g from the straight run, want <= 1e-5", stage, rel)
		}
	}
}
