package kernels_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/headroom-ml/headroom/kernels"
)

// TestLayerNormVector runs the float32 layer norm's forward and backward
// row loops on the AVX-512 loops and on the Go loops, at row lengths
// around the 8-lane blocks, and checks them against each other and the
// forward pass against its definition in float64: dgamma and dbeta bit
// for bit (each element's terms add in row order on both), y, mean, rstd
// and dx within float32 rounding of the row sums' order; in place
// (y over x, dx over dy) as out of place; and a range of rows writing
// only those rows.
func TestLayerNormVector(t *testing.T) {
	top := kernels.MaxSIMD()
	if !top.Norm {
		t.Skip("no AVX-512 layer norm on this machine or build")
	}
	defer kernels.SetSIMD(kernels.SetSIMD(top))
	r := rand.New(rand.NewPCG(5, 6))
	fill := func(n int, lo, hi float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(lo + (hi-lo)*r.Float64())
		}
		return v
	}
	near := func(what string, C int, got, want []float32, rel float64) {
		t.Helper()
		for i := range want {
			if d := math.Abs(float64(got[i]) - float64(want[i])); d > rel*math.Max(1, math.Abs(float64(want[i]))) || got[i] != got[i] {
				t.Fatalf("C=%d %s[%d]: %v, want %v", C, what, i, got[i], want[i])
			}
		}
	}
	for _, C := range []int{1, 7, 8, 9, 16, 33, 128} {
		const rows, eps = 5, 1e-5
		x, gamma, beta, dy := fill(rows*C, 2, 4), fill(C, 0.5, 1.5), fill(C, -1, 1), fill(rows*C, -1, 1)
		type fwdOut struct{ y, mean, rstd []float32 }
		fwd := func(norm bool, x []float32, lo, hi int) fwdOut {
			defer kernels.SetSIMD(kernels.SetSIMD(kernels.SIMD{Elementwise: top.Elementwise, Window: top.Window, ConvertLanes: top.ConvertLanes, Transcendental: top.Transcendental, Norm: norm}))
			o := fwdOut{make([]float32, rows*C), make([]float32, rows), make([]float32, rows)}
			kernels.LayerNormRows(o.y, o.mean, o.rstd, x, gamma, beta, C, eps, lo, hi)
			return o
		}
		vec, ref := fwd(true, x, 0, rows), fwd(false, x, 0, rows)
		near("y", C, vec.y, ref.y, 1e-6)
		near("mean", C, vec.mean, ref.mean, 1e-6)
		near("rstd", C, vec.rstd, ref.rstd, 1e-6)
		for row := 0; row < rows; row++ { // the definition, in float64
			xr := x[row*C : (row+1)*C]
			var s, ss float64
			for _, v := range xr {
				s += float64(v)
			}
			m := s / float64(C)
			for _, v := range xr {
				ss += (float64(v) - m) * (float64(v) - m)
			}
			rs := 1 / math.Sqrt(ss/float64(C)+eps)
			for j, v := range xr {
				want := (float64(v)-m)*rs*float64(gamma[j]) + float64(beta[j])
				if got := float64(vec.y[row*C+j]); math.Abs(got-want) > 1e-5*math.Max(1, math.Abs(want)) {
					t.Fatalf("C=%d y[%d,%d] = %v, want %v", C, row, j, got, want)
				}
			}
		}
		inPlace := slices.Clone(x) // the vector loops: top has Norm
		kernels.LayerNormRows(inPlace, make([]float32, rows), make([]float32, rows), inPlace, gamma, beta, C, eps, 0, rows)
		if !slices.Equal(inPlace, vec.y) {
			t.Errorf("C=%d: y over x differs from y apart", C)
		}
		part := fwd(true, x, 1, 3)
		for i, v := range part.y {
			want := float32(0)
			if row := i / C; row >= 1 && row < 3 {
				want = vec.y[i]
			}
			if v != want {
				t.Fatalf("C=%d: rows [1, 3) of 5: element %d = %v, want %v", C, i, v, want)
			}
		}

		type bwdOut struct {
			dx     []float32
			dg, db []float64
		}
		bwd := func(norm bool, dst []float32) bwdOut {
			defer kernels.SetSIMD(kernels.SetSIMD(kernels.SIMD{Elementwise: top.Elementwise, Window: top.Window, ConvertLanes: top.ConvertLanes, Transcendental: top.Transcendental, Norm: norm}))
			o := bwdOut{dst, make([]float64, C), make([]float64, C)}
			kernels.LayerNormGradRows(o.dx, o.dg, o.db, dy, x, gamma, ref.mean, ref.rstd, C, 0, rows)
			return o
		}
		bv, br := bwd(true, make([]float32, rows*C)), bwd(false, make([]float32, rows*C))
		if !slices.Equal(bv.dg, br.dg) || !slices.Equal(bv.db, br.db) {
			t.Errorf("C=%d: dgamma, dbeta %v %v, want the Go loop's %v %v", C, bv.dg, bv.db, br.dg, br.db)
		}
		near("dx", C, bv.dx, br.dx, 1e-5)
		dyCopy := slices.Clone(dy)
		over := bwd(true, dy) // dx over dy
		if !slices.Equal(over.dx, bv.dx) {
			t.Errorf("C=%d: dx over dy differs from dx apart", C)
		}
		copy(dy, dyCopy)
	}
}
