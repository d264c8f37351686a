//go:build cuda

package cuda

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/headroom-ml/headroom/backend/cpu"
	"github.com/headroom-ml/headroom/backend/cuda/ptx"
	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/datasets"
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/optim"
	"github.com/headroom-ml/headroom/runtime"
	"github.com/headroom-ml/headroom/tensor"
	"github.com/headroom-ml/headroom/train"
)

// These need an NVIDIA GPU (see gpu_test.go): built with -tags cuda they
// fail, saying what is missing, without one. scripts/gpu-check.sh runs
// them.

// gpuTarget opens the backend on device 0.
func gpuTarget(t *testing.T) *Target {
	t.Helper()
	target, err := New(0)
	if err != nil {
		t.Fatalf("no usable CUDA GPU (these tests were built with -tags cuda, which asks for one): %v", err)
	}
	t.Cleanup(func() { target.Close() })
	return target
}

// The kernel suite on the GPU: every case the interpreter checks (package
// ptxtest), JIT-compiled by the driver from the same text and run on the
// device, matches the host's kernels.
func TestKernelSuiteOnGPU(t *testing.T) {
	target := gpuTarget(t)
	t.Logf("%s (%s), kernels for %s", target.gpu.Name(), target.gpu.Model(), target.Arch())
	runSuite(t, target)
}

// The reference mlp and cnn train on the GPU for 50 steps: the final
// weights are the host run's within 1e-4 relative (of each variable's
// largest magnitude, or 1e-3 where that is smaller), and the device
// ledger's peak is the plan's. They train with SGD and momentum: Adam's
// first steps move each weight by about ±lr whatever its gradient's size,
// so weights whose gradients are near zero would follow the rounding of
// sums taken in another order (cuBLAS's), as bench/gpucheck explains.
func TestTrainOnGPU(t *testing.T) {
	trainSet, testSet, err := datasets.Digits()
	if err != nil {
		t.Fatal(err)
	}
	for _, model := range []string{"mlp", "cnn"} {
		t.Run(model, func(t *testing.T) {
			run := func(b runtime.Backend) (map[string][]float64, *train.History, *train.Trainer) {
				m, err := nn.ModelByName(model, trainSet.Shape, trainSet.Classes)
				if err != nil {
					t.Fatal(err)
				}
				cfg := train.Config{Model: m, Epochs: 3, Batch: 64, MaxSteps: 50, Seed: 5, Backend: b, NoWatchdog: true,
					Optimizer: &optim.SGD{Momentum: 0.9}, Schedule: optim.Constant(0.01)}
				tr, err := train.New(cfg, train.InMemory(trainSet, testSet))
				if err != nil {
					t.Fatal(err)
				}
				h, err := tr.Fit(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				w := map[string][]float64{}
				for _, v := range tr.Engine().Variables() {
					host := tensor.New(v.DType, v.Shape)
					if err := v.Read(host.Bytes()); err != nil {
						t.Fatal(err)
					}
					vals := make([]float64, host.Len())
					for i := range vals {
						vals[i] = host.Float64At(i)
					}
					w[v.Name] = vals
				}
				return w, h, tr
			}
			hostW, hostH, hostT := run(cpu.New(1))
			defer hostT.Close()
			gpuW, gpuH, gpuT := run(gpuTarget(t))
			defer gpuT.Close()
			worst := 0.0
			for name, hw := range hostW {
				gw := gpuW[name]
				scale := 1e-3
				for _, v := range hw {
					scale = max(scale, math.Abs(v))
				}
				for i := range hw {
					if d := math.Abs(gw[i]-hw[i]) / max(scale, 1e-30); d > worst || math.IsNaN(d) {
						worst = d
					}
				}
			}
			if !(worst <= 1e-4) {
				t.Errorf("weights differ from the host's by %.2g relative", worst)
			}
			if l := gpuT.Engine().Ledger(); l.Peak() != gpuT.Planned {
				t.Errorf("device ledger peak %d B, plan %d B", l.Peak(), gpuT.Planned)
			}
			t.Logf("%s: weights within %.2g of the host's; losses %v (GPU) %v (host)", model, worst, gpuH.LastLoss, hostH.LastLoss)
		})
	}
}

// A kernel loads from PTX text (cuModuleLoadData, cuModuleGetFunction) and
// launches with its parameter pointers (cuLaunchKernel): the bindings, on
// a GPU or on testdata/fakelib (which runs no kernel: there the zeroes
// are not checked).
func TestKernelLaunchBinding(t *testing.T) {
	target := gpuTarget(t)
	it := compile.Instr{Op: graph.OpOneHot, DType: tensor.Float32, InDType: tensor.Int32, Shape: []int{3, 5}, In: []int{1},
		Move: &compile.MoveGeom{Depth: 5}}
	l, err := ptx.Render(target.Arch(), &it, []int{3})
	if err != nil {
		t.Fatal(err)
	}
	dev := &suiteDevice{t: target}
	defer dev.Free()
	out, err := dev.Alloc("out", make([]byte, 60))
	if err != nil {
		t.Fatal(err)
	}
	idx, err := dev.Alloc("indices", []byte{1, 0, 0, 0, 4, 0, 0, 0, 9, 0, 0, 0})
	if err != nil {
		t.Fatal(err)
	}
	s := l.Steps[0]
	if err := dev.Launch(s.Kernel, s.Grid, []uint64{out, idx}); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 60)
	if err := dev.Read(got, out); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(target.gpu.Model(), "fakelib") {
		return
	}
	want := tensor.New(tensor.Float32, tensor.Shape{3, 5})
	want.SetFloat64At(1, 1)
	want.SetFloat64At(9, 1)
	if string(got) != string(want.Bytes()) {
		t.Errorf("one_hot on the GPU: got %v, want %v", tensor.As[float32](got), tensor.As[float32](want.Bytes()))
	}
}
