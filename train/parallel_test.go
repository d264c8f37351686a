package train_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/headroom-ml/headroom/data"

	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/mem"
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
	outs  [][]byte
	round int
	seen  int
	// failed: a rank gave up (abort): collectives return at once, with
	// an error, so the others end instead of waiting for it forever
	failed bool
}

// abort releases every rank waiting in a collective and fails the ones to
// come.
func (g *localGroup) abort() {
	g.mu.Lock()
	g.failed = true
	g.cond.Broadcast()
	g.mu.Unlock()
}

// err is the error of a collective once a rank has given up.
func (g *localGroup) err() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.failed {
		return errors.New("localGroup: another rank gave up")
	}
	return nil
}

func newLocalGroup(size int) *localGroup {
	g := &localGroup{size: size, bufs: make([][]byte, size), outs: make([][]byte, size)}
	g.cond = sync.NewCond(&g.mu)
	return g
}

type localRank struct {
	g    *localGroup
	rank int
	// q runs this rank's non-blocking all-reduces in the order they were
	// started, on one goroutine (as MPI's progress does), while the rank
	// goes on computing.
	q chan func()
}

// newLocalRank returns rank of group with its queue's goroutine running
// (until the queue is closed).
func newLocalRank(group *localGroup, rank int) localRank {
	r := localRank{g: group, rank: rank, q: make(chan func(), 64)}
	go func() {
		for f := range r.q {
			f()
		}
	}()
	return r
}

// localRequest is a started all-reduce of localRank.
type localRequest struct {
	done chan struct{}
	g    *localGroup
}

func (q localRequest) Wait() error {
	<-q.done
	return q.g.err()
}

// Start queues the all-reduce of buf and returns; Wait waits for it. Every
// collective goes through the queue, so ranks meet in the same order.
func (r localRank) Start(buf []byte, dt tensor.DType) (interface{ Wait() error }, error) {
	req := localRequest{done: make(chan struct{}), g: r.g}
	r.q <- func() {
		r.exchangeSum(buf, dt)
		close(req.done)
	}
	return req, nil
}

// sync runs f after the all-reduces queued before it.
func (r localRank) sync(f func()) {
	done := make(chan struct{})
	r.q <- func() {
		f()
		close(done)
	}
	<-done
}

func (r localRank) Rank() int { return r.rank }
func (r localRank) Size() int { return r.g.size }

// exchange deposits buf (and out, where the rank wants a result), and
// once every rank has, runs combine (on the last to arrive) and releases
// them all.
func (r localRank) exchange(buf []byte, combine func(bufs [][]byte), out ...[]byte) {
	g := r.g
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.failed {
		return
	}
	round := g.round
	g.bufs[r.rank] = buf
	if len(out) > 0 {
		g.outs[r.rank] = out[0]
	}
	g.seen++
	if g.seen == g.size {
		combine(g.bufs)
		g.seen = 0
		g.round++
		g.cond.Broadcast()
		return
	}
	for g.round == round && !g.failed {
		g.cond.Wait()
	}
}

func (r localRank) AllReduceSum(buf []byte, dt tensor.DType) error {
	r.sync(func() { r.exchangeSum(buf, dt) })
	return r.g.err()
}

func (r localRank) exchangeSum(buf []byte, dt tensor.DType) {
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
}

func (r localRank) ReduceScatterSum(send, recv []byte, dt tensor.DType) error {
	full := append([]byte(nil), send...)
	if err := r.AllReduceSum(full, dt); err != nil {
		return err
	}
	copy(recv, full[r.rank*len(recv):(r.rank+1)*len(recv)])
	return nil
}

func (r localRank) AllGather(send, recv []byte) error {
	r.sync(func() { r.exchangeGather(send, recv) })
	return r.g.err()
}

func (r localRank) exchangeGather(send, recv []byte) {
	g := r.g
	r.exchange(send, func(bufs [][]byte) {
		for _, out := range g.outs {
			for i, b := range bufs {
				copy(out[i*len(b):(i+1)*len(b)], b)
			}
		}
	}, recv)
}

// StartReduceScatter and StartAllGather queue the collective, as Start.
func (r localRank) StartReduceScatter(send, recv []byte, dt tensor.DType) (interface{ Wait() error }, error) {
	req := localRequest{done: make(chan struct{}), g: r.g}
	r.q <- func() {
		full := append([]byte(nil), send...)
		r.exchangeSum(full, dt)
		copy(recv, full[r.rank*len(recv):(r.rank+1)*len(recv)])
		close(req.done)
	}
	return req, nil
}

func (r localRank) StartAllGather(send, recv []byte) (interface{ Wait() error }, error) {
	req := localRequest{done: make(chan struct{}), g: r.g}
	r.q <- func() {
		r.exchangeGather(send, recv)
		close(req.done)
	}
	return req, nil
}

func (r localRank) Broadcast(buf []byte, root int) error {
	r.sync(func() {
		r.exchange(buf, func(bufs [][]byte) {
			for _, b := range bufs {
				copy(b, bufs[root])
			}
		})
	})
	return r.g.err()
}

// fitRanks trains cfg on two goroutine ranks of one localGroup and returns,
// per rank, the parameters and the optimizer-state bytes it held.
func fitRanks(t *testing.T, cfg train.Config, data *data.Examples) ([][]float64, []int64) {
	t.Helper()
	group := newLocalGroup(2)
	weights := make([][]float64, 2)
	optBytes := make([]int64, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for rank := 0; rank < 2; rank++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := cfg
			r := newLocalRank(group, rank)
			defer close(r.q)
			c.Comm = r
			tr, err := train.New(c, train.InMemory(data, nil))
			if err != nil {
				errs[rank] = err
				return
			}
			defer tr.Close()
			if _, err := tr.Fit(context.Background()); err != nil {
				errs[rank] = err
				return
			}
			weights[rank] = paramValues(tr)
			optBytes[rank] = tr.Engine().Ledger().LiveBy(mem.OptState)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return weights, optBytes
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
	cases := []struct {
		name string
		cfg  train.Config
	}{
		{"one bucket", train.Config{BucketBytes: 1 << 30}},
		{"default buckets", train.Config{}},
		{"a bucket per gradient", train.Config{BucketBytes: 64}},
		{"accumulate 2", train.Config{Accumulate: 2, BucketBytes: 256}},
		{"clipped", train.Config{ClipNorm: 0.5, BucketBytes: 256}},
		{"clipped, accumulate 2", train.Config{ClipNorm: 0.5, Accumulate: 2}},
	}
	for _, c := range cases {
		cfg := c.cfg
		cfg.Model, cfg.Optimizer, cfg.Epochs, cfg.Batch, cfg.Seed = parallelModel(), &optim.Adam{}, 2, 128, 9
		acc := c.name
		single, _ := fit(t, cfg, data)
		want := paramValues(single)
		single.Close()

		got, _ := fitRanks(t, cfg, data)
		for rank, w := range got {
			var diff, norm float64
			for i := range w {
				diff += (w[i] - want[i]) * (w[i] - want[i])
				norm += want[i] * want[i]
			}
			rel := math.Sqrt(diff / norm)
			t.Logf("%s, rank %d: relative difference %.3g", acc, rank, rel)
			if rel > 1e-5 {
				t.Errorf("%s, rank %d: weights differ from one process by %.3g relative, want <= 1e-5", acc, rank, rel)
			}
		}
		for i := range got[0] {
			if math.Float64bits(got[0][i]) != math.Float64bits(got[1][i]) {
				t.Fatalf("ranks disagree at weight %d: %v vs %v", i, got[0][i], got[1][i])
			}
		}
	}
}

// TestShardedOptimizerState: with ZeRO stage 1 two ranks end with the
// weights of the unsharded run, each holding about half the optimizer state.
func TestShardedOptimizerState(t *testing.T) {
	data := blobs(16, 1000, 8, 4)
	run := func(shard bool) ([][]float64, []int64) {
		return fitRanks(t, train.Config{Model: parallelModel(), Optimizer: &optim.Adam{}, Epochs: 2, Batch: 128, Seed: 9, ShardOptimizer: shard}, data)
	}
	plain, plainOpt := run(false)
	sharded, shardedOpt := run(true)
	for rank := range sharded {
		var diff, norm float64
		for i := range plain[rank] {
			diff += (sharded[rank][i] - plain[rank][i]) * (sharded[rank][i] - plain[rank][i])
			norm += plain[rank][i] * plain[rank][i]
		}
		rel := math.Sqrt(diff / norm)
		ratio := float64(shardedOpt[rank]) / float64(plainOpt[rank])
		t.Logf("rank %d: weights differ by %.3g; optimizer state %d B vs %d B (%.3fx)", rank, rel, shardedOpt[rank], plainOpt[rank], ratio)
		if rel > 1e-5 {
			t.Errorf("rank %d: sharded weights differ by %.3g relative, want <= 1e-5", rank, rel)
		}
		if ratio > 0.51 {
			t.Errorf("rank %d holds %.3fx the unsharded optimizer state, want <= 0.51", rank, ratio)
		}
	}
}

// TestShardedCheckpointResumes: a checkpoint of a sharded run holds the full
// optimizer state, and two ranks resumed from it (sharded) continue as an
// uninterrupted run does; one process can resume from it too.
func TestShardedCheckpointResumes(t *testing.T) {
	data := blobs(17, 512, 8, 4)
	run := func(epochs int, dir string, resume bool) [][]float64 {
		w, _ := fitRanks(t, train.Config{Model: parallelModel(), Optimizer: &optim.Adam{}, Epochs: epochs, Batch: 128, Seed: 9,
			ShardOptimizer: true, CheckpointDir: dir, Resume: resume}, data)
		return w
	}
	straight := run(2, t.TempDir(), false)
	dir := t.TempDir()
	run(1, dir, false)
	resumed := run(2, dir, true)
	for rank := range resumed {
		for i := range straight[rank] {
			if math.Float64bits(straight[rank][i]) != math.Float64bits(resumed[rank][i]) {
				t.Fatalf("rank %d weight %d: %v resumed, %v straight", rank, i, resumed[rank][i], straight[rank][i])
			}
		}
	}
	// one process resumes from the two ranks' epoch-1 checkpoint (full state)
	dir1 := t.TempDir()
	run(1, dir1, false)
	c := train.Config{Model: parallelModel(), Optimizer: &optim.Adam{}, Epochs: 2, Batch: 128, Seed: 9, CheckpointDir: dir1, Resume: true}
	tr, h := fit(t, c, data)
	defer tr.Close()
	if h.StartEpoch != 1 {
		t.Errorf("one process resumed at epoch %d, want 1", h.StartEpoch)
	}
}

// TestBucketsOverlapBackward: in a data-parallel step the gradients are
// all-reduced in buckets planned in the arena (owner allreduce/bucketN, in
// the grad category), each bucket's all-reduce starts while backward is
// still computing later gradients, and every bucket stays live until the
// update after the last one started.
func TestBucketsOverlapBackward(t *testing.T) {
	cfg := train.Config{Model: parallelModel(), Optimizer: &optim.Adam{}, Epochs: 1, Batch: 128, Seed: 9, BucketBytes: 1024}
	cfg.Comm = newLocalRank(newLocalGroup(2), 0)
	rp, err := train.PlanFor(cfg, described(tensor.Shape{8}, 1000, 4))
	if err != nil {
		t.Fatal(err)
	}
	p := rp.Step
	var buckets []compile.Buffer
	for _, b := range p.Buffers {
		if strings.HasPrefix(b.Owner, "allreduce/bucket") {
			buckets = append(buckets, b)
			if b.Kind != compile.KindArena || b.Category != mem.Grad {
				t.Errorf("bucket %s is %v/%v, want an arena buffer of category grad", b.Owner, b.Kind, b.Category)
			}
		}
	}
	// backward order: dense_1/bias (64 B), dense_1/kernel (1 KiB), dense/bias
	// (256 B), dense/kernel (2 KiB): with 1 KiB buckets, four of them, the
	// last holding the last gradient backward computes
	if len(buckets) != 4 {
		t.Fatalf("got %d buckets, want 4 (gradients of 64, 1024, 256 and 2048 B in 1 KiB buckets)", len(buckets))
	}
	first, last := buckets[0].Start, buckets[3].Start
	for i, b := range buckets[:3] {
		if b.Start >= last {
			t.Errorf("bucket %d starts at instruction %d, want before backward's last gradient (%d)", i, b.Start, last)
		}
	}
	overlapped := false // backward work defined after the first bucket started
	for _, b := range p.Buffers {
		if b.Kind == compile.KindArena && strings.HasPrefix(b.Owner, "grad/") && b.Start > first && b.Start < last {
			overlapped = true
		}
	}
	if !overlapped {
		t.Errorf("no backward buffer is written between the first bucket's start (%d) and the last gradient (%d)", first, last)
	}
	for _, b := range buckets {
		if b.End <= last {
			t.Errorf("%s is released at instruction %d, before the last bucket starts (%d): its wait must come after backward", b.Owner, b.End, last)
		}
	}
}
