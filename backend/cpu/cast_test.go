package cpu_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

// TestHalfCastSplit: the casts between float32 and the 16-bit floats, split
// over the kernels' threads when large, round as tensor's scalar
// conversions do, the same bits on one thread and on three, allocating
// nothing.
func TestHalfCastSplit(t *testing.T) {
	for _, c := range []struct {
		dt    tensor.DType
		round func(float32) float32
	}{
		{tensor.BFloat16, func(v float32) float32 { return tensor.ToBFloat16(v).Float32() }},
		{tensor.Float16, func(v float32) float32 { return tensor.ToFloat16(v).Float32() }},
	} {
		for _, shape := range []tensor.Shape{{301, 223}, {7, 5}} {
			t.Run(fmt.Sprintf("%s/%v", c.dt, shape), func(t *testing.T) {
				through := func(a, _ *graph.Node) *graph.Node { return graph.Cast(graph.Cast(a, c.dt), tensor.Float32) }
				a := randomInput(shape, 3)
				one := runOp(t, 1, shape, through, a, a)
				three := runOp(t, 3, shape, through, a, a)
				for i := range one {
					if math.Float32bits(one[i]) != math.Float32bits(three[i]) || one[i] != c.round(a[i]) {
						t.Fatalf("element %d: %v on one thread, %v on three, want %v", i, one[i], three[i], c.round(a[i]))
					}
				}
			})
		}
	}
}
