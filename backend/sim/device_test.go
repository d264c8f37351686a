package sim_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/headroom-ml/headroom/backend/cpu"
	"github.com/headroom-ml/headroom/backend/sim"
	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/optim"
	"github.com/headroom-ml/headroom/runtime"
	"github.com/headroom-ml/headroom/step"
	"github.com/headroom-ml/headroom/tensor"
)

// These tests run the reference models' training steps on a simulated
// device (mem.NewSimulated: a fixed capacity, no hardware), the stand-in
// for a GPU in CI: every device-memory path a GPU run takes (the
// reservation, the ledger, the device refusing a mapping) is exercised
// here with the same allocator and runtime.

// simCase is one reference model at a small batch (the plans' structure
// does not depend on the batch size; a small one keeps the tests fast).
type simCase struct {
	model string
	input tensor.Shape
	batch int
}

var simCases = []simCase{
	{"mlp", tensor.Shape{28, 28}, 8},
	{"cnn", tensor.Shape{28, 28, 1}, 2},
}

const simClasses = 10

// compiled is one reference step and the initializers of its weights.
type compiled struct {
	cfg  step.Config
	p    *compile.Program
	init map[string]nn.Initializer
}

// compileCase builds the reference model's training step (float32, Adam,
// sparse categorical cross-entropy) through the step builder, for the
// simulated device, and checks its plan is the host's: the simulated device
// runs the host's instructions.
func compileCase(t *testing.T, c simCase) compiled {
	t.Helper()
	m, err := nn.ModelByName(c.model, c.input, simClasses)
	if err != nil {
		t.Fatal(err)
	}
	cfg := step.Config{Model: m, Optimizer: &optim.Adam{}, Target: sim.New(1<<30, 1)}
	var init map[string]nn.Initializer
	p, err := step.Compile(cfg, c.batch, step.Train, func(b *step.Builder) {
		b.Standard()
		init = b.Ctx.Init
	})
	if err != nil {
		t.Fatal(err)
	}
	host := cfg
	host.Target = cpu.New(1)
	hp, err := step.Compile(host, c.batch, step.Train, (*step.Builder).Standard)
	if err != nil {
		t.Fatal(err)
	}
	// the same plan, but for the name of the target that owns the scratch
	if got, want := strings.ReplaceAll(p.Plan.String(), "sim", "cpu"), hp.Plan.String(); got != want {
		t.Fatalf("%s: the simulated device's plan is not the host's:\n--- sim\n%s\n--- cpu\n%s", c.model, got, want)
	}
	return compiled{cfg: cfg, p: p, init: init}
}

// simEngine returns an engine on a simulated device of the given capacity
// whose allocator maps chunks of chunk bytes (0: mem.DefaultChunkSize),
// charging a ledger without a budget unless budget > 0.
func simEngine(capacity, chunk, budget int64) (*runtime.Engine, mem.Device, *mem.Ledger) {
	target := sim.New(capacity, 1)
	ledger := mem.NewLedger("sim budget", budget)
	return runtime.NewEngine(target, 0, runtime.OnAllocator(mem.NewAllocator(target.Device(), ledger, mem.AllocatorOptions{ChunkSize: chunk}))), target.Device(), ledger
}

// runSteps initializes the weights, feeds one fixed random batch and runs
// n steps; it returns the loss of the first and the last.
func runSteps(t *testing.T, c compiled, e *runtime.Engine, x *runtime.Executable, n int) (first, last float64) {
	t.Helper()
	for name, in := range c.init {
		if v, ok := e.Variable(name); ok {
			host := tensor.New(v.DType, v.Shape)
			nn.InitTensor(in, 1, name, host)
			if err := v.Write(host.Bytes()); err != nil {
				t.Fatal(err)
			}
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for _, s := range c.p.Inputs {
		in, err := x.Input(s.Name)
		if err != nil {
			t.Fatal(err)
		}
		switch s.Name {
		case "x":
			for i, f := 0, in.Float32s(); i < len(f); i++ {
				f[i] = float32(rng.Float64())
			}
		case "y":
			for i, l := 0, in.Int32s(); i < len(l); i++ {
				l[i] = int32(rng.IntN(simClasses))
			}
		}
	}
	set := func(name string, v float64) {
		if in, err := x.Input(name); err == nil {
			in.SetFloat64At(0, v)
		}
	}
	lossOut, err := x.Output("loss")
	if err != nil {
		t.Fatal(err)
	}
	for step := int64(1); step <= int64(n); step++ {
		c.cfg.Optimizer.Feed(step, 1e-3, set)
		if err := x.Run(); err != nil {
			t.Fatal(err)
		}
		l := float64(lossOut.Float32s()[0])
		if math.IsNaN(l) || math.IsInf(l, 0) {
			t.Fatalf("step %d: loss %v", step, l)
		}
		if step == 1 {
			first = l
		}
		last = l
	}
	return first, last
}

// The reference steps load and train on a simulated device whose capacity
// is exactly what the plan needs, and the ledger measures the plan's peak,
// byte for byte.
//
// The capacity needed: the plan's peak P is a sum of 64-byte aligned
// buffers, all live at once; the device maps whole pages, so no capacity
// below RoundPage(P) can hold it. With AllocatorOptions.ChunkSize =
// RoundPage(P) the allocator maps one chunk of exactly that size and
// carves every buffer from it, so RoundPage(P) (P plus less than one page)
// is sufficient. With the default chunk (64 MiB, more than these plans) on
// a device of at least one chunk, it maps one whole chunk: the device
// holds 64 MiB for a smaller plan (the ledger still shows P).
func TestSimulatedPlannedEqualsMeasured(t *testing.T) {
	for _, c := range simCases {
		t.Run(c.model, func(t *testing.T) {
			cc := compileCase(t, c)
			peak := cc.p.Plan.Peak
			need := mem.RoundPage(peak)
			if need >= mem.DefaultChunkSize {
				t.Fatalf("plan peak %d B is not below the default chunk: the default-chunk case tests nothing", peak)
			}
			for _, k := range []struct {
				name                    string
				capacity, chunk, mapped int64
			}{
				{"one chunk of RoundPage(peak)", need, need, need},
				{"default chunk", mem.DefaultChunkSize, 0, mem.DefaultChunkSize},
			} {
				t.Run(k.name, func(t *testing.T) {
					e, dev, ledger := simEngine(k.capacity, k.chunk, 0)
					x, err := e.Load(cc.p)
					if err != nil {
						t.Fatalf("Load on a device of %d bytes: %v", k.capacity, err)
					}
					first, last := runSteps(t, cc, e, x, 4)
					if !(last < first) {
						t.Errorf("loss on a fixed batch after 4 Adam steps: got %.4f from %.4f, want lower", last, first)
					}
					if got := ledger.Peak(); got != peak {
						t.Errorf("ledger peak: got %d B, want the plan's peak %d B", got, peak)
					}
					if got := ledger.Live(); got != peak {
						t.Errorf("ledger live after 4 steps: got %d B, want %d B", got, peak)
					}
					if got, want := ledger.Totals(), cc.p.Plan.Totals; got != want {
						t.Errorf("ledger totals: got %v, want the plan's %v", got, want)
					}
					if got := dev.Mapped(); got != k.mapped {
						t.Errorf("device mapped: got %d B, want %d B", got, k.mapped)
					}
					x.Close()
					e.Close()
					if ledger.Live() != 0 || dev.Mapped() != 0 {
						t.Errorf("after Close: ledger live %d B, device mapped %d B; want 0, 0", ledger.Live(), dev.Mapped())
					}
				})
			}
			t.Logf("%s batch %d: plan peak %d B (%s); capacity needed with one chunk %d B", c.model, c.batch, peak, mem.FormatBytes(peak), need)
		})
	}
}

// wantDeviceOOM checks that err is an *mem.OOMError from the device named
// dev (not from a budget) and that the failed Load took nothing.
func wantDeviceOOM(t *testing.T, err error, dev mem.Device, ledger *mem.Ledger) {
	t.Helper()
	var oom *mem.OOMError
	if !errors.As(err, &oom) {
		t.Fatalf("Load: got %v, want *mem.OOMError", err)
	}
	if oom.Ledger != dev.Name() || oom.Budget != dev.Capacity() {
		t.Errorf("OOMError from %q with budget %d: want the device %q with its capacity %d", oom.Ledger, oom.Budget, dev.Name(), dev.Capacity())
	}
	if !strings.Contains(err.Error(), "out of memory on "+dev.Name()) {
		t.Errorf("OOM message %q: want it to name the device", err)
	}
	if len(oom.Remedies) == 0 {
		t.Error("OOMError has no remedies; Load adds the plan's")
	}
	if ledger.Live() != 0 || dev.Mapped() != 0 {
		t.Errorf("after the failed Load: ledger live %d B, device mapped %d B; want 0, 0", ledger.Live(), dev.Mapped())
	}
}

// Below what the plan needs, Load fails with an *mem.OOMError naming the
// device, before any step, and takes nothing.
func TestSimulatedOOM(t *testing.T) {
	for _, c := range simCases {
		t.Run(c.model, func(t *testing.T) {
			cc := compileCase(t, c)
			peak := cc.p.Plan.Peak
			need := mem.RoundPage(peak)
			for _, k := range []struct {
				name            string
				capacity, chunk int64
			}{
				{"capacity 1 byte", 1, 0},
				{"half the plan", peak / 2, need},
				{"one byte below the plan", peak - 1, need},
				{"one byte below the page-rounded plan", need - 1, need},
				{"one page below, default chunks", need - mem.PageSize, 0},
			} {
				t.Run(k.name, func(t *testing.T) {
					e, dev, ledger := simEngine(k.capacity, k.chunk, 0)
					defer e.Close()
					_, err := e.Load(cc.p)
					wantDeviceOOM(t, err, dev, ledger)
				})
			}
		})
	}
}

// The simulated device refuses a mapping past its capacity and takes it
// back after an Unmap.
func TestSimulatedDeviceCapacity(t *testing.T) {
	for _, c := range []struct {
		capacity int64
		pages    int // pages that fit
	}{{1, 0}, {mem.PageSize - 1, 0}, {mem.PageSize, 1}, {3*mem.PageSize + 5, 3}} {
		dev := mem.NewSimulated("sim", c.capacity)
		var held []mem.Region
		for i := 0; i < c.pages; i++ {
			r, err := dev.Map(mem.PageSize)
			if err != nil {
				t.Fatalf("capacity %d: Map of page %d: %v", c.capacity, i+1, err)
			}
			held = append(held, r)
		}
		_, err := dev.Map(mem.PageSize)
		var oom *mem.OOMError
		if !errors.As(err, &oom) || oom.Ledger != "sim" || oom.Request != mem.PageSize || oom.Budget != c.capacity {
			t.Errorf("capacity %d: Map of page %d: got %v, want *mem.OOMError on sim for %d B with budget %d", c.capacity, c.pages+1, err, mem.PageSize, c.capacity)
		}
		if len(held) > 0 {
			dev.Unmap(held[0])
			r, err := dev.Map(mem.PageSize)
			if err != nil {
				t.Errorf("capacity %d: Map after an Unmap: %v", c.capacity, err)
			}
			held[0] = r
		}
		for _, r := range held {
			dev.Unmap(r)
		}
	}
}

// With the default 64 MiB chunks on a device smaller than one chunk, the
// allocator maps each request's page-rounded size instead (reusing the
// tails of earlier ones): Load needs at most the sum of RoundPage over the
// step's persistent buffers and its arena. Whatever it maps then (M) is
// exactly the capacity it needs: M loads and M-1 does not, because the
// allocator makes the same mappings in the same order on any device
// smaller than a chunk until one is refused.
func TestSimulatedSmallerThanAChunk(t *testing.T) {
	for _, c := range simCases {
		t.Run(c.model, func(t *testing.T) {
			cc := compileCase(t, c)
			var bound int64
			for _, b := range cc.p.Plan.Buffers {
				if b.Kind != compile.KindArena && b.Bytes > 0 {
					bound += mem.RoundPage(b.Bytes)
				}
			}
			bound += mem.RoundPage(cc.p.Plan.ArenaBytes)
			if bound >= mem.DefaultChunkSize {
				t.Fatalf("sum of page-rounded requests %d B is not below one chunk (%d B): the case tests nothing", bound, int64(mem.DefaultChunkSize))
			}
			e, dev, ledger := simEngine(bound, 0, 0)
			x, err := e.Load(cc.p)
			if err != nil {
				t.Fatalf("Load on %d B (the sum of page-rounded requests): %v", bound, err)
			}
			m := dev.Mapped()
			if m < mem.RoundPage(cc.p.Plan.Peak) || m > bound {
				t.Errorf("mapped %d B: want between RoundPage(peak) %d and %d", m, mem.RoundPage(cc.p.Plan.Peak), bound)
			}
			if ledger.Peak() != cc.p.Plan.Peak {
				t.Errorf("ledger peak: got %d B, want %d B", ledger.Peak(), cc.p.Plan.Peak)
			}
			x.Close()
			e.Close()

			e, dev, ledger = simEngine(m, 0, 0)
			x, err = e.Load(cc.p)
			if err != nil {
				t.Fatalf("Load on exactly the %d B it mapped before: %v", m, err)
			}
			runSteps(t, cc, e, x, 1)
			if ledger.Peak() != cc.p.Plan.Peak || dev.Mapped() != m {
				t.Errorf("on %d B: ledger peak %d B, mapped %d B; want %d B, %d B", m, ledger.Peak(), dev.Mapped(), cc.p.Plan.Peak, m)
			}
			x.Close()
			e.Close()

			e, dev, ledger = simEngine(m-1, 0, 0)
			defer e.Close()
			_, err = e.Load(cc.p)
			wantDeviceOOM(t, err, dev, ledger)
			t.Logf("%s: plan peak %d B, mapped %d B in page-rounded regions (bound %d B)", c.model, cc.p.Plan.Peak, m, bound)
		})
	}
}

// The budget is the per-process device memory limit: on a device with
// room to spare, a ledger budget one byte below the plan refuses Load
// with the budget's *mem.OOMError, and a budget of exactly the plan's
// peak holds it.
func TestSimulatedBudget(t *testing.T) {
	for _, c := range simCases {
		t.Run(c.model, func(t *testing.T) {
			cc := compileCase(t, c)
			peak := cc.p.Plan.Peak
			e, dev, ledger := simEngine(2*mem.RoundPage(peak), mem.RoundPage(peak), peak-1)
			_, err := e.Load(cc.p)
			var oom *mem.OOMError
			if !errors.As(err, &oom) || oom.Ledger != "sim budget" || oom.Budget != peak-1 {
				t.Fatalf("Load under a budget of peak-1: got %v, want *mem.OOMError from the budget %d", err, peak-1)
			}
			if ledger.Live() != 0 || dev.Mapped() != 0 {
				t.Errorf("after the failed Load: ledger live %d B, device mapped %d B; want 0, 0", ledger.Live(), dev.Mapped())
			}
			e.Close()

			e, _, ledger = simEngine(2*mem.RoundPage(peak), mem.RoundPage(peak), peak)
			defer e.Close()
			x, err := e.Load(cc.p)
			if err != nil {
				t.Fatalf("Load under a budget of exactly the plan's peak %d B: %v", peak, err)
			}
			defer x.Close()
			runSteps(t, cc, e, x, 1)
			if ledger.Peak() != peak {
				t.Errorf("ledger peak: got %d B, want %d B", ledger.Peak(), peak)
			}
		})
	}
}
