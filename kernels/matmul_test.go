package kernels_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/headroom-ml/headroom/internal/testutil"
	"github.com/headroom-ml/headroom/kernels"
)

// storeT returns the [cols, rows] row-major storage of the [rows, cols]
// matrix x: what MatMul reads when told an operand is transposed.
func storeT(x []float64, rows, cols int) []float64 {
	y := make([]float64, len(x))
	for i := 0; i < rows; i++ {
		for j := 0; j < cols; j++ {
			y[j*rows+i] = x[i*cols+j]
		}
	}
	return y
}

// naiveMatMul is the definition: dst[i, j] = dot(row i of A, column j of B)
// with A [m, k] and B [k, n] given untransposed.
func naiveMatMul(a, b []float64, m, n, k int) []float64 {
	dst := make([]float64, m*n)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			row, col := make([]float64, k), make([]float64, k)
			for p := 0; p < k; p++ {
				row[p], col[p] = a[i*k+p], b[p*n+j]
			}
			var s float64
			for p := range row {
				s += row[p] * col[p]
			}
			dst[i*n+j] = s
		}
	}
	return dst
}

func TestMatMulHand(t *testing.T) {
	a := []float64{1, 2, 3, 4} // [[1 2] [3 4]]
	b := []float64{5, 6, 7, 8} // [[5 6] [7 8]]
	tests := []struct {
		ta, tb bool
		want   []float64
	}{
		{false, false, []float64{19, 22, 43, 50}}, // A·B
		{true, false, []float64{26, 30, 38, 44}},  // Aᵀ·B
		{false, true, []float64{17, 23, 39, 53}},  // A·Bᵀ
		{true, true, []float64{23, 31, 34, 46}},   // Aᵀ·Bᵀ
	}
	for _, tc := range tests {
		got := kernels.MatMul(make([]float64, 4), a, b, 2, 2, 2, tc.ta, tc.tb, false)
		testutil.RequireClose(t, fmt.Sprintf("transA=%v transB=%v", tc.ta, tc.tb), got, tc.want, 0, 0)
	}
	// [1, 3]·[3, 1] and accumulation into a non-zero dst.
	got := kernels.MatMul([]float64{10}, []float64{1, 2, 3}, []float64{4, 5, 6}, 1, 1, 3, false, false, true)
	testutil.RequireClose(t, "accumulate", got, []float64{42}, 0, 0)
}

func TestMatMulNaive(t *testing.T) {
	r := rng(6)
	for _, s := range [][3]int{{1, 1, 1}, {3, 5, 7}, {7, 5, 3}, {9, 1, 13}, {1, 9, 13}, {6, 8, 4}, {13, 11, 1}, {17, 19, 23}} {
		m, n, k := s[0], s[1], s[2]
		a, b := testutil.RandFloats(r, m*k), testutil.RandFloats(r, k*n)
		want := naiveMatMul(a, b, m, n, k)
		at, bt := storeT(a, m, k), storeT(b, k, n)
		for _, ta := range []bool{false, true} {
			for _, tb := range []bool{false, true} {
				for _, acc := range []bool{false, true} {
					t.Run(fmt.Sprintf("%dx%dx%d/transA=%v/transB=%v/acc=%v", m, n, k, ta, tb, acc), func(t *testing.T) {
						aa, bb := a, b
						if ta {
							aa = at
						}
						if tb {
							bb = bt
						}
						dst0 := testutil.RandFloats(r, m*n)
						dst := append([]float64(nil), dst0...)
						w := want
						if acc {
							w = make([]float64, m*n)
							for i := range w {
								w[i] = want[i] + dst0[i]
							}
						}
						kernels.MatMul(dst, aa, bb, m, n, k, ta, tb, acc)
						testutil.RequireClose(t, "MatMul", dst, w, 1e-13, 1e-14)
					})
				}
			}
		}
	}
}

func TestMatMulEdges(t *testing.T) {
	// k = 0: the product is the zero matrix (or dst unchanged when accumulating).
	got := kernels.MatMul([]float64{3, 3, 3, 3, 3, 3}, nil, nil, 2, 3, 0, false, false, false)
	testutil.RequireClose(t, "k=0", got, make([]float64, 6), 0, 0)
	got = kernels.MatMul([]float64{3, 3}, nil, nil, 1, 2, 0, true, true, true)
	testutil.RequireClose(t, "k=0 accumulate", got, []float64{3, 3}, 0, 0)
	// 0·Inf is NaN: a kernel must not skip zero entries.
	inf := math.Inf(1)
	for _, tb := range []bool{false, true} {
		got = kernels.MatMul(make([]float64, 1), []float64{0, 1}, []float64{inf, 1}, 1, 1, 2, false, tb, false)
		if !math.IsNaN(got[0]) {
			t.Errorf("[0 1]·[Inf 1]ᵀ (transB=%v) = %v, want NaN", tb, got[0])
		}
	}
	// NaN in dst is dropped without accumulate, kept with it.
	got = kernels.MatMul([]float64{nan64}, []float64{2}, []float64{3}, 1, 1, 1, false, false, false)
	testutil.RequireClose(t, "overwrite NaN", got, []float64{6}, 0, 0)
}
