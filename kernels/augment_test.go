package kernels_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/headroom-ml/headroom/kernels"
)

// A row 1 2 3 4 (one image of 1×4 pixels, one channel) read at shifted
// columns shows each fill mode as TensorFlow documents it: for abcd,
// reflect (d c b a | a b c d | d c b a), wrap (a b c d | a b c d | ...),
// constant (k k k k | a b c d | k k k k), nearest (a a a a | a b c d |
// d d d d).
func TestImageTransformFillModes(t *testing.T) {
	x := []float64{1, 2, 3, 4}
	shift := func(dx float64) []float64 { return []float64{1, 0, dx, 0, 1, 0, 0, 0} } // output x reads input x + dx
	for _, tc := range []struct {
		name string
		fill int
		dx   float64
		want []float64
	}{
		{"reflect left", kernels.FillReflect, -3, []float64{3, 2, 1, 1}},
		{"reflect right", kernels.FillReflect, 3, []float64{4, 4, 3, 2}},
		{"reflect far", kernels.FillReflect, -9, []float64{1, 1, 2, 3}}, // period 8: -9 and -8 read a
		{"wrap left", kernels.FillWrap, -2, []float64{3, 4, 1, 2}},
		// TensorFlow's wrap subtracts W·⌊c/(W-1)⌋: 6 goes to -2, clamped to 0
		{"wrap right", kernels.FillWrap, 3, []float64{4, 1, 2, 1}},
		{"constant", kernels.FillConstant, 2, []float64{3, 4, -1, -1}},
		{"nearest", kernels.FillNearest, -2, []float64{1, 1, 1, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, bilinear := range []bool{false, true} {
				g := kernels.ImageTransformGeom{N: 1, H: 1, W: 4, C: 1, Transforms: 1, Bilinear: bilinear, Fill: tc.fill, FillValue: -1}
				got := kernels.ImageTransform(make([]float64, 4), x, shift(tc.dx), g)
				for i := range got {
					if got[i] != tc.want[i] {
						t.Fatalf("bilinear %v: got %v, want %v", bilinear, got, tc.want)
					}
				}
			}
		})
	}
}

// Interpolation between pixels: bilinear weights by distance, a neighbour
// outside the image reads the fill value; nearest rounds half away from
// zero (C's std::round, as TensorFlow's kernel); constant filling gives the
// fill value for a point outside [0, W-1] however close.
func TestImageTransformInterpolation(t *testing.T) {
	x := []float64{1, 2, 3, 4, 10, 20, 30, 40} // 2×4, one channel
	g := kernels.ImageTransformGeom{N: 1, H: 2, W: 4, C: 1, Transforms: 1, Bilinear: true, Fill: kernels.FillConstant, FillValue: 0}
	// output (x, y) reads (x + 0.25, y + 0.5)
	got := kernels.ImageTransform(make([]float64, 8), x, []float64{1, 0, 0.25, 0, 1, 0.5, 0, 0}, g)
	for i, want := range []float64{
		0.5*(0.75*1+0.25*2) + 0.5*(0.75*10+0.25*20), 0.5*(0.75*2+0.25*3) + 0.5*(0.75*20+0.25*30),
		0.5*(0.75*3+0.25*4) + 0.5*(0.75*30+0.25*40), 0, // x = 3.25 is outside [0, 3]
		0, 0, 0, 0, // y = 1.5 is outside [0, 1]
	} {
		if math.Abs(got[i]-want) > 1e-12 {
			t.Fatalf("bilinear: got %v at %d, want %v (all %v)", got[i], i, want, got)
		}
	}
	g.Bilinear, g.Fill = false, kernels.FillNearest
	got = kernels.ImageTransform(make([]float64, 8), x, []float64{1, 0, 0.5, 0, 1, -0.5, 0, 0}, g)
	// columns 0.5, 1.5, 2.5, 3.5 round to 1, 2, 3, 3 (clamped); rows -0.5
	// (clamped to 0) and 0.5 round to 0 and 1
	want := []float64{2, 3, 4, 4, 20, 30, 40, 40}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("nearest: got %v, want %v", got, want)
		}
	}
}

// A flip is a transform too: x' = W-1-x reads the mirrored column exactly;
// each image takes its own transform row; a projection to infinity (k = 0)
// reads the fill value.
func TestImageTransformPerImage(t *testing.T) {
	x := []float64{1, 2, 3, 4, 5, 6} // 2 images of 1×3
	g := kernels.ImageTransformGeom{N: 2, H: 1, W: 3, C: 1, Transforms: 2, Bilinear: true, Fill: kernels.FillReflect, FillValue: 9}
	flip := []float64{-1, 0, 2, 0, 1, 0, 0, 0}
	infinite := []float64{1, 0, 0, 0, 1, 0, -1, 0} // k = 1 - x: zero at x = 1
	got := kernels.ImageTransform(make([]float64, 6), x, append(flip, infinite...), g)
	want := []float64{3, 2, 1, 4, 9, 5} // image 2 at x = 2 reads 2/(1-2) = -2: reflected to 1, value 5
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}

// ImageTransformGrad is the adjoint of ImageTransform (with a zero fill
// value, ImageTransform is linear in x): <dy, T x> = <Tᵀ dy, x> for random
// images under random transforms, every fill mode and interpolation.
func TestImageTransformGradIsAdjoint(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const n, h, w, c = 2, 5, 7, 3
	for fill := kernels.FillReflect; fill <= kernels.FillNearest; fill++ {
		for _, bilinear := range []bool{false, true} {
			g := kernels.ImageTransformGeom{N: n, H: h, W: w, C: c, Transforms: n, Bilinear: bilinear, Fill: fill}
			tr := make([]float64, 8*n)
			for i := 0; i < n; i++ {
				a := rng.Float64()*6 - 3
				s := 0.6 + rng.Float64()
				copy(tr[8*i:], []float64{s * math.Cos(a), -s * math.Sin(a), rng.Float64()*4 - 1, s * math.Sin(a), s * math.Cos(a), rng.Float64()*4 - 1, 0, 0})
			}
			x, dy := make([]float64, n*h*w*c), make([]float64, n*h*w*c)
			for i := range x {
				x[i], dy[i] = rng.NormFloat64(), rng.NormFloat64()
			}
			y := kernels.ImageTransform(make([]float64, len(x)), x, tr, g)
			dx := kernels.ImageTransformGrad(make([]float64, len(x)), dy, tr, g)
			lhs, rhs := 0.0, 0.0
			for i := range x {
				lhs += dy[i] * y[i]
				rhs += dx[i] * x[i]
			}
			if math.Abs(lhs-rhs) > 1e-12*max(1, math.Abs(lhs)) {
				t.Errorf("fill %d bilinear %v: <dy, T x> = %v, <Tᵀ dy, x> = %v", fill, bilinear, lhs, rhs)
			}
		}
	}
}

// RandomUniform's draws lie in [0, 1), repeat for one (seed, step), differ
// for another step or seed, and are the same in float32 and float64
// (exact 24-bit values); their mean is 1/2 within 6 standard deviations.
func TestRandomUniform(t *testing.T) {
	const n = 100000
	a := kernels.RandomUniform(make([]float64, n), 7, 3)
	b := kernels.RandomUniform(make([]float64, n), 7, 3)
	c := kernels.RandomUniform(make([]float64, n), 7, 4)
	d := kernels.RandomUniform(make([]float64, n), 8, 3)
	f := kernels.RandomUniform(make([]float32, n), 7, 3)
	same, sameSeed, mean := 0, 0, 0.0
	for i, v := range a {
		if !(v >= 0 && v < 1) {
			t.Fatalf("draw %d = %v, want it in [0, 1)", i, v)
		}
		if v != b[i] || float64(f[i]) != v {
			t.Fatalf("draw %d: %v, again %v, float32 %v: want the same", i, v, b[i], f[i])
		}
		if v == c[i] {
			same++
		}
		if v == d[i] {
			sameSeed++
		}
		mean += v / n
	}
	if same > 10 || sameSeed > 10 {
		t.Errorf("%d draws equal across steps, %d across seeds: want independent draws", same, sameSeed)
	}
	if sd := math.Sqrt(1.0 / 12 / n); math.Abs(mean-0.5) > 6*sd {
		t.Errorf("mean %v, want 0.5 ± %v", mean, 6*sd)
	}
}
