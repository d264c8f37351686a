package datasets

import (
	"math/rand/v2"

	"github.com/headroom-ml/headroom/data"
	"github.com/headroom-ml/headroom/tensor"
)

// Synthetic returns the peers' synthetic workload: n training and nTest
// test examples of shape, features N(0,1) float32, labelled by the argmax
// of a fixed random linear teacher over `classes` outputs (peers/common.py's
// make_data; the same distribution, drawn by Go's generator).
func Synthetic(shape tensor.Shape, n, nTest, classes int, seed uint64) (trainSet, testSet *data.Examples) {
	d := shape.Size()
	rng := rand.New(rand.NewPCG(seed, 0x7eac4e5))
	w := make([]float32, d*classes)
	for i := range w {
		w[i] = float32(rng.NormFloat64())
	}
	all := &data.Examples{Name: "synthetic", Shape: shape, N: n + nTest, Classes: classes,
		Floats: make([]float32, (n+nTest)*d), Labels: make([]int32, n+nTest)}
	scores := make([]float32, classes)
	for i := 0; i < all.N; i++ {
		x := all.Floats[i*d : (i+1)*d]
		clear(scores)
		for k := range x {
			x[k] = float32(rng.NormFloat64())
			wk := w[k*classes : (k+1)*classes]
			for c := range scores {
				scores[c] += x[k] * wk[c]
			}
		}
		best := 0
		for c := range scores {
			if scores[c] > scores[best] {
				best = c
			}
		}
		all.Labels[i] = int32(best)
	}
	return all.Slice("synthetic/train", 0, n), all.Slice("synthetic/test", n, n+nTest)
}
