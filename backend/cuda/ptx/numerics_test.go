package ptx_test

import (
	"testing"

	"github.com/headroom-ml/headroom/backend/cuda/ptx"
	"github.com/headroom-ml/headroom/backend/cuda/ptx/ptxtest"
)

// Every case of the shared suite (package ptxtest: every op the renderer
// writes) runs as its exact PTX in the interpreter and matches the host's
// kernel.
func TestKernelsMatchHost(t *testing.T) {
	cs := ptxtest.Cases()
	if missing := ptxtest.Covers(cs); len(missing) > 0 {
		t.Errorf("no numerics case for %v", missing)
	}
	dev := ptxtest.Interpreter(ptx.Arch{SM: 80, Version: 70})
	for i := range cs {
		c := &cs[i]
		t.Run(c.Name, func(t *testing.T) { ptxtest.Check(t, dev, c) })
	}
}
