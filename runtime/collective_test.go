package runtime_test

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/headroom-ml/headroom/backend/cpu"

	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/kernels"
	"github.com/headroom-ml/headroom/runtime"
	"github.com/headroom-ml/headroom/tensor"
)

// twoRanks stands for the other process of a run with two: a started
// all-reduce adds 1 to every float32 of the buffer (the other rank's
// share) when it is waited for, and the fake counts what is in flight.
type twoRanks struct {
	mu       sync.Mutex
	inFlight int
	started  int
}

func (c *twoRanks) Rank() int { return 0 }
func (c *twoRanks) Size() int { return 2 }
func (c *twoRanks) AllReduceSum(buf []byte, dt tensor.DType) error {
	addOne(buf)
	return nil
}
func (c *twoRanks) ReduceScatterSum(send, recv []byte, dt tensor.DType) error { return nil }
func (c *twoRanks) AllGather(send, recv []byte) error                         { return nil }

// StartReduceScatter: rank 0's block of the sum, the other rank adding 1
// to every element, lands in recv when the request is waited for.
func (c *twoRanks) StartReduceScatter(send, recv []byte, dt tensor.DType) (runtime.Request, error) {
	if len(send) != 2*len(recv) {
		return nil, errors.New("twoRanks: reduce-scatter buffers do not fit two ranks")
	}
	c.mu.Lock()
	c.inFlight++
	c.started++
	c.mu.Unlock()
	return &fakeRequest{c: c, buf: recv, fill: func() { copy(recv, send[:len(recv)]) }}, nil
}

// StartAllGather: rank 0's send, then the other rank's (send + 1).
func (c *twoRanks) StartAllGather(send, recv []byte) (runtime.Request, error) {
	if len(recv) != 2*len(send) {
		return nil, errors.New("twoRanks: all-gather buffers do not fit two ranks")
	}
	c.mu.Lock()
	c.inFlight++
	c.started++
	c.mu.Unlock()
	other := recv[len(send):]
	return &fakeRequest{c: c, buf: other, fill: func() { copy(recv, send); copy(other, send) }}, nil
}
func (c *twoRanks) Start(buf []byte, dt tensor.DType) (runtime.Request, error) {
	c.mu.Lock()
	c.inFlight++
	c.started++
	c.mu.Unlock()
	return &fakeRequest{c: c, buf: buf}, nil
}

type fakeRequest struct {
	c    *twoRanks
	buf  []byte
	fill func() // what lands in the buffers before buf gets the other rank's 1s
}

func (r *fakeRequest) Wait() error {
	if r.fill != nil {
		r.fill()
	}
	addOne(r.buf)
	r.c.mu.Lock()
	r.c.inFlight--
	r.c.mu.Unlock()
	return nil
}

func addOne(buf []byte) {
	t, _ := tensor.FromBytes(tensor.Float32, tensor.Shape{len(buf) / 4}, buf)
	for i, v := range t.Float32s() {
		t.Float32s()[i] = v + 1
	}
}

// loadOn compiles build and loads it on a fresh CPU engine with comm (nil:
// one process); the executable and the engine close with the test.
func loadOn(t *testing.T, comm runtime.Collective, build func() (*graph.Graph, compile.Options)) *runtime.Executable {
	t.Helper()
	return loadWith(t, cpu.New(0), comm, build)
}

// loadWith is loadOn on the host backend host, which the test closes.
func loadWith(t *testing.T, host *cpu.Target, comm runtime.Collective, build func() (*graph.Graph, compile.Options)) *runtime.Executable {
	t.Helper()
	t.Cleanup(host.Close)
	p, err := compile.Build(build)
	if err != nil {
		t.Fatal(err)
	}
	e := runtime.NewEngine(host, 0)
	t.Cleanup(e.Close)
	if comm != nil {
		e.SetCollective(comm)
	}
	x, err := e.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(x.Close)
	return x
}

// collectiveStep: out = AllReduceWait(AllReduceStart(2·x)) + 0·loss, where
// loss is a cross-entropy whose labels come from the input y, run between
// the start and the wait (a bad label makes the step fail there).
func collectiveStep() (*graph.Graph, compile.Options) {
	g := graph.New()
	x := g.Input("x", tensor.Float32, tensor.Shape{2, 3})
	y := g.Input("y", tensor.Int32, tensor.Shape{2})
	s := graph.AllReduceStart(graph.MulScalar(x, 2))
	loss := graph.ReduceSum(graph.SoftmaxCrossEntropy(x, y))
	out := graph.Add(graph.AllReduceWait(s), graph.MulScalar(loss, 0))
	return g, compile.Options{Target: cpu.New(0), Name: "step", Outputs: []compile.Output{{Name: "out", Node: out}}}
}

func TestAllReduceStartWait(t *testing.T) {
	for _, comm := range []*twoRanks{nil, {}} {
		var c runtime.Collective
		if comm != nil {
			c = comm
		}
		x := loadOn(t, c, collectiveStep)
		in, _ := x.Input("x")
		copy(in.Float32s(), []float32{1, 2, 3, 4, 5, 6})
		if err := x.Run(); err != nil {
			t.Fatal(err)
		}
		out, _ := x.Output("out")
		want := []float32{2, 4, 6, 8, 10, 12}
		if comm != nil {
			for i := range want {
				want[i]++ // the other rank's share
			}
			if comm.started != 1 || comm.inFlight != 0 {
				t.Errorf("started %d, in flight %d after the step; want 1 and 0", comm.started, comm.inFlight)
			}
		}
		for i, v := range out.Float32s() {
			if v != want[i] {
				t.Errorf("comm %v: out[%d] = %v, want %v", comm != nil, i, v, want[i])
			}
		}
		if comm != nil {
			// a bad label fails the step between the start and the wait: the
			// all-reduce in flight is still completed before Run returns
			lab, _ := x.Input("y")
			lab.Int32s()[1] = 7
			err := x.Run()
			if err == nil || !strings.Contains(err.Error(), "label 7") {
				t.Errorf("got %v, want the bad label's error", err)
			}
			if comm.started != 2 || comm.inFlight != 0 {
				t.Errorf("after a failed step: started %d, in flight %d; want 2 and 0", comm.started, comm.inFlight)
			}
		}
	}
}

// blockStep: rs = ReduceScatterWait(ReduceScatterStart(2·x)) and ag =
// AllGatherWait(AllGatherStart(3·x)), with work between the starts and
// the waits that could take their inputs' memory if the waits did not
// keep it.
func blockStep() (*graph.Graph, compile.Options) {
	g := graph.New()
	x := g.Input("x", tensor.Float32, tensor.Shape{64})
	rs := graph.ReduceScatterStart(graph.MulScalar(x, 2), 2)
	ag := graph.AllGatherStart(graph.MulScalar(x, 3), 2)
	busy := graph.ReduceSum(graph.Tanh(graph.MulScalar(x, 5)))
	out := graph.Add(graph.ReduceScatterWait(rs), graph.MulScalar(busy, 0))
	return g, compile.Options{Target: cpu.New(0), Name: "step", Outputs: []compile.Output{
		{Name: "rs", Node: out}, {Name: "ag", Node: graph.AllGatherWait(ag)}}}
}

func TestReduceScatterAndAllGatherStartWait(t *testing.T) {
	p, err := compile.Build(blockStep)
	if err != nil {
		t.Fatal(err)
	}
	at := map[graph.Op]int{} // the instruction of each op
	for i, it := range p.Instrs {
		at[it.Op] = i
	}
	for start, wait := range map[graph.Op]graph.Op{graph.OpReduceScatterStart: graph.OpReduceScatterWait, graph.OpAllGatherStart: graph.OpAllGatherWait} {
		send := p.Plan.Buffers[p.Instrs[at[start]].In[0]]
		if send.End < at[wait] {
			t.Errorf("%s's input (%s) is live [%d, %d]; its %s runs at %d: the input must live until then", start, send.Owner, send.Start, send.End, wait, at[wait])
		}
		if at[graph.OpReduceSum] < at[start] || at[graph.OpReduceSum] > at[wait] {
			t.Errorf("reduce_sum runs at %d, not between %s (%d) and its wait (%d): the test checks nothing", at[graph.OpReduceSum], start, at[start], at[wait])
		}
	}
	for _, comm := range []*twoRanks{nil, {}} {
		var c runtime.Collective
		if comm != nil {
			c = comm
		}
		x := loadOn(t, c, blockStep)
		in, _ := x.Input("x")
		for i := range in.Float32s() {
			in.Float32s()[i] = float32(i)
		}
		if err := x.Run(); err != nil {
			t.Fatal(err)
		}
		rs, _ := x.Output("rs")
		ag, _ := x.Output("ag")
		n := rs.Len()
		if comm != nil && (n != 32 || ag.Len() != 128) {
			t.Fatalf("two ranks: rs has %d elements, ag %d; want 32 and 128", n, ag.Len())
		}
		for i := 0; i < n; i++ {
			want := float32(2 * i)
			if comm != nil {
				want++
			}
			if got := rs.Float32s()[i]; got != want {
				t.Errorf("comm %v: rs[%d] = %v, want %v", comm != nil, i, got, want)
			}
		}
		for i := 0; i < ag.Len(); i++ {
			if comm == nil && i >= 64 {
				break // one process gathers its own block only
			}
			want := float32(3 * (i % 64))
			if comm != nil && i >= 64 {
				want++
			}
			if got := ag.Float32s()[i]; got != want {
				t.Errorf("comm %v: ag[%d] = %v, want %v", comm != nil, i, got, want)
			}
		}
		if comm != nil && (comm.started != 2 || comm.inFlight != 0) {
			t.Errorf("started %d, in flight %d after the step; want 2 and 0", comm.started, comm.inFlight)
		}
	}
}

func TestAllReduceStartReadOnlyByItsWait(t *testing.T) {
	for name, build := range map[string]func(g *graph.Graph, s *graph.Node) *graph.Node{
		"read before the wait": func(g *graph.Graph, s *graph.Node) *graph.Node {
			return graph.Add(graph.AllReduceWait(s), s)
		},
		"two waits": func(g *graph.Graph, s *graph.Node) *graph.Node {
			return graph.Add(graph.AllReduceWait(s), graph.AllReduceWait(s))
		},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := compile.Build(func() (*graph.Graph, compile.Options) {
				g := graph.New()
				x := g.Input("x", tensor.Float32, tensor.Shape{4})
				out := build(g, graph.AllReduceStart(graph.MulScalar(x, 2)))
				return g, compile.Options{Target: cpu.New(0), Outputs: []compile.Output{{Name: "out", Node: out}}}
			})
			if err == nil || !strings.Contains(err.Error(), "all_reduce_start") {
				t.Fatalf("got %v, want an error naming the all_reduce_start", err)
			}
		})
	}
}

// TestMatMulBF16Policy: a product of a graph made with
// graph.BF16Products runs on bfloat16 operands (kernels.MatMulBF16's
// bits), one of a plain graph in float32.
func TestMatMulBF16Policy(t *testing.T) {
	const m, k, n = 3, 5, 4
	product := func(opts ...graph.Option) tensor.Tensor {
		x := loadOn(t, nil, func() (*graph.Graph, compile.Options) {
			g := graph.New(opts...)
			a := g.Input("a", tensor.Float32, tensor.Shape{m, k})
			b := g.Input("b", tensor.Float32, tensor.Shape{k, n})
			return g, compile.Options{Target: cpu.New(0), Outputs: []compile.Output{{Name: "out", Node: graph.MatMul(a, b)}}}
		})
		a, _ := x.Input("a")
		b, _ := x.Input("b")
		for i := range a.Float32s() {
			a.Float32s()[i] = 1 + float32(i)/1000 // not representable in bfloat16
		}
		for i := range b.Float32s() {
			b.Float32s()[i] = 1 - float32(i)/3000
		}
		if err := x.Run(); err != nil {
			t.Fatal(err)
		}
		out, _ := x.Output("out")
		return out
	}
	full, low := product(), product(graph.BF16Products())
	a, b := make([]float32, m*k), make([]float32, k*n)
	for i := range a {
		a[i] = 1 + float32(i)/1000
	}
	for i := range b {
		b[i] = 1 - float32(i)/3000
	}
	wantFull := kernels.MatMul(make([]float32, m*n), a, b, m, n, k, false, false, false)
	wantLow := kernels.MatMulBF16(make([]float32, m*n), a, b, m, n, k, false, false, false)
	for i := range wantFull {
		if full.Float32s()[i] != wantFull[i] || low.Float32s()[i] != wantLow[i] {
			t.Fatalf("element %d: got %v (float32) and %v (bf16), want %v and %v", i, full.Float32s()[i], low.Float32s()[i], wantFull[i], wantLow[i])
		}
	}
	if wantFull[0] == wantLow[0] {
		t.Fatal("the test's operands round to the same product in bfloat16; pick others")
	}
}

// TestHalfCastsInParts: casts between float32 and the 16-bit types, large
// enough to be split over the kernels' threads, convert every element as
// the scalar conversions do.
func TestHalfCastsInParts(t *testing.T) {
	const n = 3<<15 + 7 // over exec's split threshold, not a multiple of the parts
	for _, dt := range []tensor.DType{tensor.BFloat16, tensor.Float16} {
		host := cpu.New(2)
		x := loadWith(t, host, nil, func() (*graph.Graph, compile.Options) {
			g := graph.New()
			x := g.Input("x", tensor.Float32, tensor.Shape{n})
			low := graph.Cast(x, dt)
			return g, compile.Options{Target: host, Outputs: []compile.Output{{Name: "low", Node: low}, {Name: "back", Node: graph.Cast(low, tensor.Float32)}}}
		})
		in, _ := x.Input("x")
		for i := range in.Float32s() {
			in.Float32s()[i] = float32(i)*1.000123 - n/2
		}
		if err := x.Run(); err != nil {
			t.Fatal(err)
		}
		low, _ := x.Output("low")
		back, _ := x.Output("back")
		for i, v := range in.Float32s() {
			var bits uint16
			var want float32
			if dt == tensor.BFloat16 {
				h := tensor.ToBFloat16(v)
				bits, want = uint16(h), h.Float32()
			} else {
				h := tensor.ToFloat16(v)
				bits, want = uint16(h), h.Float32()
			}
			if got := tensor.As16[uint16](low.Bytes())[i]; got != bits || back.Float32s()[i] != want {
				t.Fatalf("%s element %d (%v): got %#04x and %v back, want %#04x and %v", dt, i, v, got, back.Float32s()[i], bits, want)
			}
		}
	}
}

// rankLost is a typed error a communicator returns (as dist's
// *TimeoutError names the rank that did not arrive).
type rankLost struct{ rank int }

func (e *rankLost) Error() string { return "rank lost" }

// failingRanks fails every collective with a *rankLost.
type failingRanks struct{ twoRanks }

func (c *failingRanks) AllReduceSum([]byte, tensor.DType) error { return &rankLost{rank: 1} }
func (c *failingRanks) Start([]byte, tensor.DType) (runtime.Request, error) {
	return nil, &rankLost{rank: 1}
}

// A collective's typed error reaches the caller of Run wrapped, not
// flattened into text: errors.As finds it, inside a *runtime.RunError that
// names the op.
func TestCollectiveErrorIsWrapped(t *testing.T) {
	x := loadOn(t, &failingRanks{}, collectiveStep)
	err := x.Run()
	var lost *rankLost
	if !errors.As(err, &lost) || lost.rank != 1 {
		t.Fatalf("Run: %v; want an error wrapping the communicator's *rankLost", err)
	}
	var re *runtime.RunError
	if !errors.As(err, &re) || re.Op != graph.OpAllReduceStart {
		t.Errorf("Run: %v; want a *runtime.RunError naming all_reduce_start", err)
	}
}
