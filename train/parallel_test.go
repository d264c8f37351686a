package train_test

import (
	"math"
	"sync"
	"testing"

	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/optim"
	"github.com/headroom-ml/headroom/tensor"
	"github.com/headroom-ml/headroom/train"
)

// localGroup is an in-process stand-in for MPI: size goroutines, one per
// rank, meet at each collective; sums are taken in rank order, so every
// rank gets the same bits.
type localGroup struct {
	size  int
	mu    sync.Mutex
	cond  *sync.Cond
	bufs  [][]byte
	round int
	seen  int
}

func newLocalGroup(size int) *localGroup {
	g := &localGroup{size: size, bufs: make([][]byte, size)}
	g.cond = sync.NewCond(&g.mu)
	return g
}

type localRank struct {
	g    *localGroup
	rank int
}

func (r localRank) Rank() int { return r.rank }
func (r localRank) Size() int { return r.g.size }

// exchange deposits buf, and once every rank has, runs combine (on the
// last to arrive) and releases them all.
func (r localRank) exchange(buf []byte, combine func(bufs [][]byte)) {
	g := r.g
	g.mu.Lock()
	defer g.mu.Unlock()
	round := g.round
	g.bufs[r.rank] = buf
	g.seen++
	if g.seen == g.size {
		combine(g.bufs)
		g.seen = 0
		g.round++
		g.cond.Broadcast()
		return
	}
	for g.round == round {
		g.cond.Wait()
	}
}

func (r localRank) AllReduceSum(buf []byte, dt tensor.DType) error {
	r.exchange(buf, func(bufs [][]byte) {
		sum, _ := tensor.FromBytes(dt, tensor.Shape{len(buf) / dt.Size()}, append([]byte(nil), bufs[0]...))
		for _, b := range bufs[1:] {
			t, _ := tensor.FromBytes(dt, tensor.Shape{len(b) / dt.Size()}, b)
			for i := 0; i < t.Len(); i++ {
				sum.SetFloat64At(i, sum.Float64At(i)+t.Float64At(i))
			}
		}
		for _, b := range bufs {
			copy(b, sum.Bytes())
		}
	})
	return nil
}

func (r localRank) Broadcast(buf []byte, root int) error {
	r.exchange(buf, func(bufs [][]byte) {
		for _, b := range bufs {
			copy(b, bufs[root])
		}
	})
	return nil
}

func parallelModel() *nn.Sequential {
	return &nn.Sequential{InputShape: tensor.Shape{8}, Layers: []nn.Layer{
		&nn.Dense{LayerName: "dense", Units: 64, Activation: "relu"},
		&nn.Dense{LayerName: "dense_1", Units: 4},
	}}
}

func paramValues(tr *train.Trainer) []float64 {
	var w []float64
	for _, v := range tr.Engine().Variables() {
		if v.Role == 0 {
			for i := 0; i < v.Shape.Size(); i++ {
				w = append(w, v.Tensor().Float64At(i))
			}
		}
	}
	return w
}

// TestDataParallelMatchesOneProcess: two ranks with a global batch of 128
// (64 each) end with the weights of one process with batch 128, on data
// with a partial last batch, with and without accumulation.
func TestDataParallelMatchesOneProcess(t *testing.T) {
	data := blobs(15, 1000, 8, 4) // 7 batches of 128 and one of 104
	for _, acc := range []int{1, 2} {
		cfg := train.Config{Model: parallelModel(), Optimizer: &optim.Adam{}, Epochs: 2, Batch: 128, Seed: 9, Accumulate: acc}
		single, _ := fit(t, cfg, data)
		want := paramValues(single)
		single.Close()

		group := newLocalGroup(2)
		got := make([][]float64, 2)
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for rank := 0; rank < 2; rank++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := cfg
				c.Comm = localRank{g: group, rank: rank}
				tr, err := train.New(c, data)
				if err != nil {
					errs[rank] = err
					return
				}
				defer tr.Close()
				if _, err := tr.Fit(data); err != nil {
					errs[rank] = err
					return
				}
				got[rank] = paramValues(tr)
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		for rank, w := range got {
			var diff, norm float64
			for i := range w {
				diff += (w[i] - want[i]) * (w[i] - want[i])
				norm += want[i] * want[i]
			}
			rel := math.Sqrt(diff / norm)
			t.Logf("accumulate %d, rank %d: relative difference %.3g", acc, rank, rel)
			if rel > 1e-5 {
				t.Errorf("accumulate %d, rank %d: weights differ from one process by %.3g relative, want <= 1e-5", acc, rank, rel)
			}
		}
		for i := range got[0] {
			if math.Float64bits(got[0][i]) != math.Float64bits(got[1][i]) {
				t.Fatalf("ranks disagree at weight %d: %v vs %v", i, got[0][i], got[1][i])
			}
		}
	}
}
