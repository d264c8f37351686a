package kernels_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/headroom-ml/headroom/internal/testutil"
	"github.com/headroom-ml/headroom/kernels"
)

func TestSoftmaxHand(t *testing.T) {
	// softmax([0, ln 3]) = [1/4, 3/4]; adding a constant changes nothing.
	for _, shift := range []float64{0, 1000, -1000} {
		x := []float64{shift, shift + math.Log(3)}
		got := kernels.Softmax(make([]float64, 2), x, 1, 2)
		testutil.RequireClose(t, fmt.Sprintf("Softmax shift %v", shift), got, []float64{0.25, 0.75}, 0, 1e-12)
		got = kernels.LogSoftmax(make([]float64, 2), x, 1, 2)
		testutil.RequireClose(t, fmt.Sprintf("LogSoftmax shift %v", shift), got, []float64{-math.Log(4), math.Log(0.75)}, 0, 1e-12) // 1000+ln 3 is rounded to ulp(1000)
	}
	// Uniform logits: the cross-entropy is ln(cols) whatever the label.
	loss := make([]float64, 2)
	if bad := kernels.SoftmaxCrossEntropy(loss, []float64{2, 2, 2, 2, -7, -7, -7, -7}, []int32{0, 3}, 2, 4); bad != -1 {
		t.Errorf("bad = %d, want -1", bad)
	}
	testutil.RequireClose(t, "uniform cross-entropy", loss, []float64{math.Log(4), math.Log(4)}, 1e-14, 0)
}

// TestSoftmaxIdentities checks relations between the kernels on random
// logits, including rows shifted by ±1000 that overflow without the row max.
func TestSoftmaxIdentities(t *testing.T) {
	r := rng(7)
	for _, s := range [][2]int{{1, 1}, {3, 5}, {6, 17}, {2, 64}} {
		rows, cols := s[0], s[1]
		t.Run(fmt.Sprintf("%dx%d", rows, cols), func(t *testing.T) {
			x := testutil.RandFloats(r, rows*cols)
			for i := range x {
				x[i] *= 8
				switch i / cols % 3 {
				case 1:
					x[i] += 1000
				case 2:
					x[i] -= 1000
				}
			}
			sm := kernels.Softmax(make([]float64, len(x)), x, rows, cols)
			lsm := kernels.LogSoftmax(make([]float64, len(x)), x, rows, cols)
			for row := 0; row < rows; row++ {
				var sum float64
				for c := 0; c < cols; c++ {
					v := sm[row*cols+c]
					if !(v >= 0 && v <= 1) {
						t.Fatalf("softmax[%d, %d] = %v, want in [0, 1]", row, c, v)
					}
					sum += v
				}
				if math.Abs(sum-1) > 1e-14 {
					t.Errorf("row %d of Softmax sums to %v, want 1", row, sum)
				}
			}
			logSm := make([]float64, len(sm))
			for i, v := range sm {
				logSm[i] = math.Log(v)
			}
			testutil.RequireClose(t, "LogSoftmax vs log(Softmax)", lsm, logSm, 1e-12, 1e-12)

			labels := make([]int32, rows)
			for i := range labels {
				labels[i] = int32(r.IntN(cols))
			}
			loss := make([]float64, rows)
			if bad := kernels.SoftmaxCrossEntropy(loss, x, labels, rows, cols); bad != -1 {
				t.Fatalf("bad = %d with valid labels", bad)
			}
			want := make([]float64, rows)
			for i, l := range labels {
				want[i] = -lsm[i*cols+int(l)]
			}
			testutil.RequireClose(t, "cross-entropy vs -LogSoftmax at the label", loss, want, 1e-13, 1e-13)

			// In place gives the same answer.
			y := append([]float64(nil), x...)
			kernels.Softmax(y, y, rows, cols)
			testutil.RequireClose(t, "Softmax in place", y, sm, 0, 0)
		})
	}
}

// TestSoftmaxGradsNumeric checks every softmax-family gradient against the
// central difference of a scalar loss built from its forward kernel.
func TestSoftmaxGradsNumeric(t *testing.T) {
	const rows, cols = 3, 5
	r := rng(8)
	x := testutil.RandFloats(r, rows*cols)
	for i := range x {
		x[i] *= 3
	}
	g := testutil.RandFloats(r, rows*cols)
	gRow := testutil.RandFloats(r, rows)
	labels := []int32{4, 0, 2}
	buf := make([]float64, rows*cols)
	dot := func(a, b []float64) float64 {
		var s float64
		for i := range a {
			s += a[i] * b[i]
		}
		return s
	}
	tests := []struct {
		name string
		loss func(x []float64) float64
		grad func() []float64
	}{
		{"SoftmaxGrad",
			func(x []float64) float64 { return dot(g, kernels.Softmax(buf, x, rows, cols)) },
			func() []float64 {
				y := kernels.Softmax(make([]float64, len(x)), x, rows, cols)
				return kernels.SoftmaxGrad(make([]float64, len(x)), y, g, rows, cols)
			}},
		{"LogSoftmaxGrad",
			func(x []float64) float64 { return dot(g, kernels.LogSoftmax(buf, x, rows, cols)) },
			func() []float64 {
				y := kernels.LogSoftmax(make([]float64, len(x)), x, rows, cols)
				return kernels.LogSoftmaxGrad(make([]float64, len(x)), y, g, rows, cols)
			}},
		{"SoftmaxCrossEntropyGrad",
			func(x []float64) float64 {
				kernels.SoftmaxCrossEntropy(buf[:rows], x, labels, rows, cols)
				return dot(gRow, buf[:rows])
			},
			func() []float64 {
				d := make([]float64, len(x))
				kernels.SoftmaxCrossEntropyGrad(d, x, labels, gRow, rows, cols)
				return d
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := testutil.NumericGrad(tc.loss, x, 1e-6)
			got := tc.grad()
			if e := testutil.RelErr(got, want); e > 1e-6 {
				t.Errorf("relative error %.3g against the numeric gradient, want < 1e-6\ngot  %v\nwant %v", e, got, want)
			}
		})
	}
}

func TestSoftmaxCrossEntropyBadLabels(t *testing.T) {
	const rows, cols = 5, 3
	x := testutil.RandFloats(rng(9), rows*cols)
	tests := []struct {
		labels []int32
		bad    int
	}{
		{[]int32{0, 1, 2, 0, 1}, -1},
		{[]int32{0, 3, 2, -1, 1}, 1},
		{[]int32{-1, 0, 0, 0, 0}, 0},
		{[]int32{0, 0, 0, 0, 1 << 30}, 4},
		{[]int32{-1 << 31, 5, 0, 0, 0}, 0},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint(tc.labels), func(t *testing.T) {
			loss := make([]float64, rows)
			if bad := kernels.SoftmaxCrossEntropy(loss, x, tc.labels, rows, cols); bad != tc.bad {
				t.Errorf("SoftmaxCrossEntropy bad = %d, want %d", bad, tc.bad)
			}
			g := []float64{1, 1, 1, 1, 1}
			d := make([]float64, rows*cols)
			if bad := kernels.SoftmaxCrossEntropyGrad(d, x, tc.labels, g, rows, cols); bad != tc.bad {
				t.Errorf("SoftmaxCrossEntropyGrad bad = %d, want %d", bad, tc.bad)
			}
			for r, l := range tc.labels {
				isBad := l < 0 || l >= cols
				if math.IsNaN(loss[r]) != isBad {
					t.Errorf("row %d (label %d): loss %v, want NaN exactly when the label is bad", r, l, loss[r])
				}
				for c := 0; c < cols; c++ {
					if math.IsNaN(d[r*cols+c]) != isBad {
						t.Errorf("row %d (label %d): gradient %v, want NaN exactly when the label is bad", r, l, d[r*cols+c])
					}
				}
			}
		})
	}
	// Zero classes: every label is out of range.
	loss := []float64{0}
	if bad := kernels.SoftmaxCrossEntropy(loss, nil, []int32{0}, 1, 0); bad != 0 || !math.IsNaN(loss[0]) {
		t.Errorf("cols = 0: bad = %d, loss = %v, want 0 and NaN", bad, loss[0])
	}
}

func TestSoftmaxFloat32Stable(t *testing.T) {
	x := []float32{1e4, 1e4 + 1, -1e4, 88, 89, 90}
	got := kernels.Softmax(make([]float32, 6), x, 2, 3)
	for i, v := range got {
		if isNaN32(v) || v < 0 || v > 1 {
			t.Errorf("Softmax(float32)[%d] = %v, want a probability", i, v)
		}
	}
	loss := make([]float32, 2)
	kernels.SoftmaxCrossEntropy(loss, x, []int32{2, 0}, 2, 3)
	// Row 0: label 2 has logit 2e4 below the max: loss ≈ 2e4 + log(1+e^-1).
	want := []float64{1e4 + 1 + 1e4 + math.Log1p(math.Exp(-1)), 2 + math.Log(1+math.Exp(-1)+math.Exp(-2))}
	testutil.RequireClose(t, "large-logit loss", testutil.ToFloat64s(loss), want, 1e-6, 0)
}
