package kernels_test

import (
	"testing"

	"github.com/headroom-ml/headroom/internal/testutil"
	"github.com/headroom-ml/headroom/kernels"
	"github.com/headroom-ml/headroom/tensor"
)

// shapesFrom decodes two broadcast-compatible shapes and a permutation of
// the output's axes from fuzz bytes: rank up to 6, dimensions 1 to 4, with
// each input dimension either the output's or 1.
func shapesFrom(data []byte) (out, a, b tensor.Shape, perm []int) {
	next := func() int {
		if len(data) == 0 {
			return 0
		}
		v := int(data[0])
		data = data[1:]
		return v
	}
	r := next() % 7
	out = make(tensor.Shape, r)
	for i := range out {
		out[i] = 1 + next()%4
	}
	sub := func() tensor.Shape {
		s := out[next()%(r+1):].Clone()
		for i := range s {
			if next()%3 == 0 {
				s[i] = 1
			}
		}
		return s
	}
	a, b = sub(), sub()
	perm = make([]int, r)
	for i := range perm {
		perm[i] = i
	}
	for i := r - 1; i > 0; i-- { // Fisher–Yates driven by the data
		j := next() % (i + 1)
		perm[i], perm[j] = perm[j], perm[i]
	}
	out, _ = tensor.Broadcast(a, b) // a or b may have dropped leading dims
	if len(out) < r {
		perm = perm[:0]
		for i := range out {
			perm = append(perm, len(out)-1-i)
		}
	}
	return out, a, b, perm
}

// FuzzBroadcastWalk checks the stride walker that BinaryBroadcast, Where,
// BroadcastTo, ReduceSum and Transpose share against index formulas written
// from shapes, on shapes the fuzzer chooses.
func FuzzBroadcastWalk(f *testing.F) {
	f.Add([]byte{2, 3, 4, 0, 1, 1, 0, 2, 0})
	f.Add([]byte{4, 1, 2, 3, 2, 0, 1, 0, 2, 2, 1, 1, 3, 1, 0})
	f.Add([]byte{6, 2, 1, 2, 3, 1, 2, 0, 0, 0, 1, 0, 0, 3, 2, 2, 1, 1, 1, 4, 3, 2, 1})
	f.Add([]byte{0})
	f.Fuzz(func(t *testing.T, data []byte) {
		out, as, bs, perm := shapesFrom(data)
		r := rng(uint64(len(data)))
		a, b := testutil.RandFloats(r, as.Size()), testutil.RandFloats(r, bs.Size())
		n := out.Size()

		got := kernels.BinaryBroadcast(kernels.Sub, make([]float64, n), a, b, out, tensor.BroadcastStrides(as, out), tensor.BroadcastStrides(bs, out))
		want := make([]float64, n)
		for i := range want {
			idx := unravel(i, out)
			want[i] = a[broadcastIndex(idx, as)] - b[broadcastIndex(idx, bs)]
		}
		testutil.RequireClose(t, "BinaryBroadcast "+as.String()+" "+bs.String(), got, want, 0, 0)

		// ReduceSum back to a's shape (padded to out's rank).
		keep := make(tensor.Shape, len(out))
		for i := range keep {
			keep[i] = 1
		}
		copy(keep[len(out)-len(as):], as)
		sum := kernels.ReduceSum(make([]float64, as.Size()), got, out, tensor.BroadcastStrides(keep, out))
		wantSum := make([]float64, as.Size())
		for i, v := range got {
			wantSum[broadcastIndex(unravel(i, out), as)] += v
		}
		testutil.RequireClose(t, "ReduceSum to "+as.String(), sum, wantSum, 1e-12, 1e-12)

		// Transpose of the result.
		pshape := make([]int, len(out))
		for d, p := range perm {
			pshape[d] = out[p]
		}
		tr := kernels.Transpose(make([]float64, n), got, out, perm)
		for i, v := range tr {
			idx := unravel(i, pshape)
			j := make([]int, len(idx))
			for d, p := range perm {
				j[p] = idx[d]
			}
			if w := got[ravel(j, out)]; v != w {
				t.Fatalf("Transpose %v perm %v: element %d = %v, want %v", out, perm, i, v, w)
			}
		}
	})
}
