package sim_test

import (
	"testing"

	"github.com/headroom-ml/headroom/backend/cpu"
	"github.com/headroom-ml/headroom/backend/sim"
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

// TestSupportsAsTheHost: the simulated device runs the host's kernels, so
// it supports exactly the ops and dtypes the host does.
func TestSupportsAsTheHost(t *testing.T) {
	host, dev := cpu.New(1), sim.New(1<<20, 1)
	n := 0
	for op := graph.Op(0); op < graph.NumOps; op++ {
		for dt := tensor.DType(0); dt <= tensor.Bool; dt++ {
			for in := tensor.DType(0); in <= tensor.Bool; in++ {
				h, d := host.Supports(op, dt, in), dev.Supports(op, dt, in)
				if h != d {
					t.Errorf("Supports(%s, %s, %s): sim %v, cpu %v", op, dt, in, d, h)
				}
				if h {
					n++
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("the host supports nothing")
	}
}
