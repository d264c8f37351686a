package cuda

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/headroom-ml/headroom/backend/cpu"
	"github.com/headroom-ml/headroom/datasets"
	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/runtime"
	"github.com/headroom-ml/headroom/train"
)

// fakeTarget returns the CUDA backend on a fake GPU of total bytes: device
// memory in host memory, kernels run by the PTX interpreter, products by
// the fake cuBLAS.
func fakeTarget(t *testing.T, total uint64) (*Target, *emuDriver) {
	t.Helper()
	g, f := openFake(t, total)
	tg, err := onGPU(g, &emuBLAS{f: f})
	if err != nil {
		t.Fatal(err)
	}
	return tg, f
}

// The reference mlp and cnn train through backend/cuda on the fake GPU:
// every kernel of every step is the rendered PTX run by the interpreter,
// every product the fake cuBLAS. The losses of every epoch (training and
// validation) match the host run's within 1e-5 relative, the device
// ledger's peak is the plan's byte for byte, the arena is one cuMemAlloc
// of its size, and inputs are staged through pinned memory on the host
// ledger.
func TestTrainOnFakeGPU(t *testing.T) {
	trainSet, testSet, err := datasets.Digits()
	if err != nil {
		t.Fatal(err)
	}
	for _, model := range []string{"mlp", "cnn"} {
		t.Run(model, func(t *testing.T) {
			config := func(b runtime.Backend) train.Config {
				m, err := nn.ModelByName(model, trainSet.Shape, trainSet.Classes)
				if err != nil {
					t.Fatal(err)
				}
				return train.Config{Model: m, Epochs: 1, Batch: 64, MaxSteps: 12, Seed: 5, Backend: b, NoWatchdog: true}
			}
			run := func(b runtime.Backend) (*train.History, *train.Trainer) {
				tr, err := train.New(config(b), train.InMemory(trainSet, testSet))
				if err != nil {
					t.Fatal(err)
				}
				h, err := tr.Fit(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				return h, tr
			}
			hostH, hostT := run(cpu.New(1))
			defer hostT.Close()
			dev, f := fakeTarget(t, 1<<30)
			gpuH, gpuT := run(dev)
			defer gpuT.Close()
			for _, c := range []struct {
				what      string
				got, want float64
			}{{"last loss", gpuH.LastLoss, hostH.LastLoss}, {"first loss", gpuH.FirstLoss, hostH.FirstLoss},
				{"validation loss", gpuH.Epochs[0].ValLoss, hostH.Epochs[0].ValLoss}} {
				if rel := math.Abs(c.got-c.want) / math.Abs(c.want); !(rel <= 1e-5) {
					t.Errorf("%s %v on the GPU, %v on the host: %.2g relative", c.what, c.got, c.want, rel)
				}
			}
			ledger := gpuT.Engine().Ledger()
			if ledger.Name() != "cuda:0" || ledger.Peak() != gpuT.Planned || gpuH.MeasuredPeak != gpuT.Planned {
				t.Errorf("device ledger %q peak %d B (history %d B), want the plan's %d B", ledger.Name(), ledger.Peak(), gpuH.MeasuredPeak, gpuT.Planned)
			}
			if hl := gpuT.Engine().HostLedger(); hl == ledger || hl.Peak() == 0 {
				t.Errorf("host ledger %q peak %d: want the staging charged to a host ledger of its own", hl.Name(), hl.Peak())
			}
			if f.launches == 0 {
				t.Error("no kernel was launched")
			}
			// the arena: one cuMemAlloc of its size (page-rounded)
			rp, err := train.PlanFor(config(dev), train.InMemory(trainSet, testSet))
			if err != nil {
				t.Fatal(err)
			}
			var arena int64
			for _, p := range rp.Programs {
				arena = max(arena, p.Plan.ArenaBytes)
			}
			found := false
			for _, n := range f.sizes {
				found = found || int64(n) == mem.RoundPage(arena)
			}
			if arena > 2<<20 && !found {
				t.Errorf("no cuMemAlloc of the arena's %d B (rounded to a page) among %v", arena, f.sizes)
			}
			t.Logf("%s: losses %v (GPU) %v (host); %d launches, planned %d B, cuMemAlloc sizes %v", model, gpuH.LastLoss, hostH.LastLoss,
				f.launches, gpuT.Planned, f.sizes)
		})
	}
}

// A device budget one byte under the plan fails in New, before step 1,
// with *mem.OOMError; nothing is left mapped on the GPU.
func TestOOMBeforeStepOne(t *testing.T) {
	trainSet, _, err := datasets.Digits()
	if err != nil {
		t.Fatal(err)
	}
	m, err := nn.ModelByName("cnn", trainSet.Shape, trainSet.Classes)
	if err != nil {
		t.Fatal(err)
	}
	dev, f := fakeTarget(t, 1<<30)
	cfg := train.Config{Model: m, Epochs: 1, Batch: 64, Backend: dev, NoWatchdog: true}
	rp, err := train.PlanFor(cfg, train.InMemory(trainSet, nil))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Budget = rp.Peak - 1
	tr, err := train.New(cfg, train.InMemory(trainSet, nil))
	if err == nil {
		tr.Close()
		t.Fatalf("a budget of %d B for a plan of %d B: no error", cfg.Budget, rp.Peak)
	}
	var oom *mem.OOMError
	if !errors.As(err, &oom) {
		t.Fatalf("got %v, want *mem.OOMError", err)
	}
	if f.launches != 0 || dev.gpu.Mapped() != 0 {
		t.Errorf("%d launches and %d B mapped after the refusal", f.launches, dev.gpu.Mapped())
	}
	t.Log(err)
}

// Small language models (the reference gpt's and lstm's architectures,
// narrower) train through backend/cuda on the fake GPU with the host's
// losses: embedding gather and its scatter-add, layer norm, gelu, causal
// attention and its three backward kernels, the lstm's slices and
// gradient sums, clipping by the global norm.
func TestLanguageModelsOnFakeGPU(t *testing.T) {
	text := make([]byte, 3000)
	words := []string{"func ", "main", "() {\n", "\treturn ", "x", " := ", "if ", "err != nil", " {\n", "}\n"}
	for i, n := 0, 0; n < len(text); i++ {
		n += copy(text[n:], words[(i*7+i/3)%len(words)])
	}
	const T = 8
	for _, tc := range []struct {
		name  string
		model nn.Model
	}{
		{"gpt", &nn.GPT{Vocab: 256, Context: T, Dim: 16, Heads: 2, Blocks: 2, Hidden: 32}},
		{"lstm", &nn.LSTMLM{Vocab: 256, Context: T, Embed: 16, Units: 24}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := func(b runtime.Backend) *train.History {
				cfg := train.Config{Model: tc.model, Epochs: 1, Batch: 4, MaxSteps: 6, Seed: 3, Backend: b, NoWatchdog: true, ClipNorm: 1}
				tr, err := train.New(cfg, train.OnText(&train.Text{Name: "go-like", Train: text[:2600], Val: text[2600:], T: T, ValWindows: 4}))
				if err != nil {
					t.Fatal(err)
				}
				defer tr.Close()
				h, err := tr.Fit(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				return h
			}
			host := run(cpu.New(1))
			dev, f := fakeTarget(t, 1<<30)
			gpu := run(dev)
			for _, c := range []struct {
				what      string
				got, want float64
			}{{"last loss", gpu.LastLoss, host.LastLoss}, {"validation loss", gpu.Epochs[0].ValLoss, host.Epochs[0].ValLoss}} {
				if rel := math.Abs(c.got-c.want) / math.Abs(c.want); !(rel <= 1e-5) {
					t.Errorf("%s %v on the GPU, %v on the host: %.2g relative", c.what, c.got, c.want, rel)
				}
			}
			t.Logf("%s: last loss %v (GPU) %v (host), %d launches", tc.name, gpu.LastLoss, host.LastLoss, f.launches)
		})
	}
}
