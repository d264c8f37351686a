package sim_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/headroom-ml/headroom/backend/cpu"
	"github.com/headroom-ml/headroom/backend/sim"
	"github.com/headroom-ml/headroom/datasets"
	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/runtime"
	"github.com/headroom-ml/headroom/tensor"
	"github.com/headroom-ml/headroom/train"
)

// The reference mlp and cnn train on the simulated device through the same
// step builder and backend seam as on the host: the trainer stages every
// batch in and every output and checkpoint out through explicit copies,
// the device's ledger measures exactly the planned peak, and the final
// weights equal the host run's bit for bit.
func TestTrainOnSimulatedDevice(t *testing.T) {
	trainSet, testSet, err := datasets.Digits()
	if err != nil {
		t.Fatal(err)
	}
	for _, model := range []string{"mlp", "cnn"} {
		t.Run(model, func(t *testing.T) {
			run := func(b runtime.Backend) (map[string][]byte, *train.History, *train.Trainer) {
				m, err := nn.ModelByName(model, trainSet.Shape, trainSet.Classes)
				if err != nil {
					t.Fatal(err)
				}
				cfg := train.Config{Model: m, Epochs: 1, Batch: 64, Seed: 5, Backend: b, NoWatchdog: true,
					CheckpointDir: t.TempDir()}
				tr, err := train.New(cfg, train.InMemory(trainSet, testSet))
				if err != nil {
					t.Fatal(err)
				}
				h, err := tr.Fit(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				w := map[string][]byte{}
				for _, v := range tr.Engine().Variables() {
					host := tensor.New(v.DType, v.Shape)
					if err := v.Read(host.Bytes()); err != nil {
						t.Fatal(err)
					}
					w[v.Name] = host.Bytes()
				}
				return w, h, tr
			}
			hostW, hostH, hostT := run(cpu.New(1))
			defer hostT.Close()
			dev := sim.New(1<<30, 1)
			simW, simH, simT := run(dev)
			defer simT.Close()
			if simH.LastLoss != hostH.LastLoss || simH.Epochs[0].ValLoss != hostH.Epochs[0].ValLoss {
				t.Errorf("last loss %v, val loss %v on the device; the host's %v, %v", simH.LastLoss, simH.Epochs[0].ValLoss, hostH.LastLoss, hostH.Epochs[0].ValLoss)
			}
			if len(simW) != len(hostW) || len(simW) == 0 {
				t.Fatalf("%d variables on the device, %d on the host", len(simW), len(hostW))
			}
			for name, hw := range hostW {
				if string(simW[name]) != string(hw) {
					t.Errorf("variable %s differs from the host's", name)
				}
			}
			ledger := simT.Engine().Ledger()
			if ledger.Name() != "sim" || ledger.Peak() != simT.Planned || simH.MeasuredPeak != simT.Planned {
				t.Errorf("device ledger %q peak %d B (history %d B), want the plan's %d B", ledger.Name(), ledger.Peak(), simH.MeasuredPeak, simT.Planned)
			}
			st := dev.Stats()
			steps := int64((trainSet.N + 63) / 64)
			if st.CopiesIn < steps || st.CopiesOut < steps || st.Bindings == 0 {
				t.Errorf("device stats %+v: want at least a copy in and out per step (%d steps) and bound programs", st, steps)
			}
			t.Logf("%s: planned %d B on the device; %d copies in (%d B), %d out (%d B)", model, simT.Planned, st.CopiesIn, st.BytesIn, st.CopiesOut, st.BytesOut)
		})
	}
}

// A device smaller than the plan fails at reservation, in New, with an
// *mem.OOMError naming the device; the host memory is given back.
func TestTrainOverCapacity(t *testing.T) {
	trainSet, _, err := datasets.Digits()
	if err != nil {
		t.Fatal(err)
	}
	m, err := nn.ModelByName("cnn", trainSet.Shape, trainSet.Classes)
	if err != nil {
		t.Fatal(err)
	}
	cfg := train.Config{Model: m, Epochs: 1, Batch: 64}
	rp, err := train.PlanFor(cfg, train.InMemory(trainSet, nil))
	if err != nil {
		t.Fatal(err)
	}
	plan, need := rp.Step, rp.Peak
	cfg.Backend = sim.New(need/2, 1)
	tr, err := train.New(cfg, train.InMemory(trainSet, nil))
	if err == nil {
		tr.Close()
		t.Fatalf("New on a device of %d B for a plan of %d B: nil error", need/2, need)
	}
	var oom *mem.OOMError
	if !errors.As(err, &oom) || oom.Ledger != "sim" {
		t.Fatalf("New: %v; want *mem.OOMError from the device", err)
	}
	t.Logf("plan %d B (step peak %d B) on a %d B device: %v", need, plan.Peak, need/2, err)
	// the batch the remedy names trains on that device
	var fit int
	for _, r := range oom.Remedies {
		if _, err := fmt.Sscanf(r[strings.Index(r, "; batch ")+2:], "batch %d fits", &fit); err == nil {
			break
		}
	}
	if fit <= 0 || fit >= cfg.Batch {
		t.Fatalf("remedies %q: want a smaller batch that fits", oom.Remedies)
	}
	cfg.Batch, cfg.Backend = fit, sim.New(need/2, 1)
	tr, err = train.New(cfg, train.InMemory(trainSet, nil))
	if err != nil {
		t.Fatalf("batch %d, which the remedy says fits: %v", fit, err)
	}
	tr.Close()
}
