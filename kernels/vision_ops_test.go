package kernels_test

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/headroom-ml/headroom/internal/testutil"
	"github.com/headroom-ml/headroom/kernels"
)

func TestResizeBilinearTF(t *testing.T) {
	// tf.image.resize([[1, 2], [3, 4]], [4, 4], "bilinear") (half-pixel
	// centers): each axis reads positions -0.25, 0.25, 0.75, 1.25, clamped.
	x := []float64{1, 2, 3, 4}
	want := []float64{
		1, 1.25, 1.75, 2,
		1.5, 1.75, 2.25, 2.5,
		2.5, 2.75, 3.25, 3.5,
		3, 3.25, 3.75, 4,
	}
	got := kernels.ResizeBilinear(make([]float64, 16), x, kernels.ResizeGeom{N: 1, H: 2, W: 2, C: 1, OH: 4, OW: 4})
	testutil.RequireClose(t, "2x2 -> 4x4", got, want, 0, 1e-15)
	// shrinking 4 -> 2 reads positions 0.5 and 2.5: the mean of each pair
	row := []float64{1, 3, 5, 7}
	got = kernels.ResizeBilinear(make([]float64, 2), row, kernels.ResizeGeom{N: 1, H: 1, W: 4, C: 1, OH: 1, OW: 2})
	testutil.RequireClose(t, "4 -> 2", got, []float64{2, 6}, 0, 1e-15)
}

// naiveResize interpolates with weights computed from the definition.
func naiveResize(x []float64, n, h, w, c, oh, ow int) []float64 {
	pos := func(o, in, out int) (int, int, float64) {
		p := (float64(o)+0.5)*float64(in)/float64(out) - 0.5
		lo := math.Floor(p)
		return max(int(lo), 0), min(int(math.Ceil(p)), in-1), p - lo
	}
	y := make([]float64, n*oh*ow*c)
	for b := 0; b < n; b++ {
		for i := 0; i < oh; i++ {
			y0, y1, fy := pos(i, h, oh)
			for j := 0; j < ow; j++ {
				x0, x1, fx := pos(j, w, ow)
				for k := 0; k < c; k++ {
					v := func(r, s int) float64 { return x[at4(b, r, s, k, h, w, c)] }
					y[at4(b, i, j, k, oh, ow, c)] = (1-fy)*((1-fx)*v(y0, x0)+fx*v(y0, x1)) + fy*((1-fx)*v(y1, x0)+fx*v(y1, x1))
				}
			}
		}
	}
	return y
}

func TestResizeBilinearNaive(t *testing.T) {
	r := rng(3)
	for _, tc := range [][6]int{{2, 3, 4, 2, 6, 8}, {1, 5, 5, 3, 3, 2}, {2, 4, 3, 1, 7, 5}, {1, 1, 1, 2, 3, 3}} {
		n, h, w, c, oh, ow := tc[0], tc[1], tc[2], tc[3], tc[4], tc[5]
		t.Run(fmt.Sprint(tc), func(t *testing.T) {
			g := kernels.ResizeGeom{N: n, H: h, W: w, C: c, OH: oh, OW: ow}
			x := testutil.RandFloats(r, n*h*w*c)
			want := naiveResize(x, n, h, w, c, oh, ow)
			got := kernels.ResizeBilinear(testutil.RandFloats(r, len(want)), x, g)
			testutil.RequireClose(t, "ResizeBilinear", got, want, 1e-14, 1e-14)
			// the gradient is the transpose: <dy, R x> = <Rᵀ dy, x>
			dy := testutil.RandFloats(r, len(want))
			dx := kernels.ResizeBilinearGrad(testutil.RandFloats(r, len(x)), dy, g)
			var a, b float64
			for i := range dy {
				a += dy[i] * got[i]
			}
			for i := range x {
				b += dx[i] * x[i]
			}
			if math.Abs(a-b) > 1e-12*max(1, math.Abs(a)) {
				t.Errorf("<dy, Rx> = %v, <Rᵀdy, x> = %v", a, b)
			}
		})
	}
}

// TestMoments checks the mean and variance per channel against the
// two-pass definition, in float64 and float32, for rows of images (and of
// none) in one group and in many, shifted far from zero, on 1 to 3
// threads: the same bits on every thread count.
func TestMoments(t *testing.T) {
	r := rng(9)
	for _, tc := range []struct {
		rows, cols, image int
		shift             float64
	}{{1, 3, 1, 0}, {7, 5, 1, 0}, {1000, 16, 1, 0}, {513, 3, 1, 1e4}, {300, 20, 1, 0}, {257, 32, 1, 1e4}, {1, 48, 1, -5},
		{128 * 49, 16, 49, 0}, {100 * 9, 17, 9, 1e4}, {600 * 4, 32, 4, 3}, {3 * 784, 16, 784, 0}, {300 * 196, 5, 196, 0}, {40 * 25, 64, 25, -2}} {
		t.Run(fmt.Sprintf("%dx%d/%d+%g", tc.rows, tc.cols, tc.image, tc.shift), func(t *testing.T) {
			x := testutil.RandFloats(r, tc.rows*tc.cols)
			for i := range x {
				x[i] += tc.shift
			}
			block := kernels.MomentsBlock(tc.rows, tc.image)
			k, n := block/tc.image, tc.rows/tc.image
			fewer := k > 1 && (k-1)*tc.image >= 128 && (n+k-2)/(k-1) <= 256 // k-1 images would do
			if groups := (tc.rows + block - 1) / block; block%tc.image != 0 || groups > 256 || (block < 128 && block < tc.rows) || fewer {
				t.Fatalf("MomentsBlock(%d, %d) = %d: %d groups, want the fewest whole images of 128 rows at least, at most 256 groups", tc.rows, tc.image, block, groups)
			}
			want := naiveMoments(x, tc.rows, tc.cols)
			work := make([]float64, kernels.MomentsWork(tc.rows, tc.cols, block))
			got := kernels.Moments(make([]float64, 2*tc.cols), x, tc.rows, tc.cols, block, work)
			testutil.RequireClose(t, "Moments", got, want, 1e-10, 1e-12)
			// float32: the moments of the rounded values, to float32's precision
			x32 := f32(x)
			want32 := naiveMoments(f64s(x32), tc.rows, tc.cols)
			var first []float32
			for threads := 1; threads <= 3; threads++ {
				p := kernels.NewPool(threads)
				got32 := kernels.MomentsOn(p, make([]float32, 2*tc.cols), x32, tc.rows, tc.cols, block, work)
				p.Close()
				testutil.RequireClose(t, "float32 Moments", f64s(got32), want32, 1e-6, 1e-7)
				if first == nil {
					first = got32
				} else if !slices.Equal(got32, first) {
					t.Errorf("%d threads: %v, 1 thread %v: want the same bits", threads, got32, first)
				}
			}
		})
	}
}

// TestChannelSums checks Σg and Σg·x per channel against the definition,
// in float64 and float32, for channel counts below, at and past the
// vector width and rows that split unevenly, on 1 to 3 threads: the same
// bits on every thread count.
func TestChannelSums(t *testing.T) {
	r := rng(11)
	for _, tc := range []struct{ rows, cols int }{{1, 3}, {7, 5}, {1000, 16}, {513, 17}, {300, 20}, {257, 32}, {2, 48}, {0, 4}} {
		t.Run(fmt.Sprintf("%dx%d", tc.rows, tc.cols), func(t *testing.T) {
			g, x := testutil.RandFloats(r, tc.rows*tc.cols), testutil.RandFloats(r, tc.rows*tc.cols)
			wantG, wantGX := make([]float64, tc.cols), make([]float64, tc.cols)
			for i := 0; i < tc.rows; i++ {
				for c := 0; c < tc.cols; c++ {
					wantG[c] += g[i*tc.cols+c]
					wantGX[c] += g[i*tc.cols+c] * x[i*tc.cols+c]
				}
			}
			g32, x32 := f32(g), f32(x)
			want32G, want32GX := make([]float64, tc.cols), make([]float64, tc.cols)
			for i := range g32 {
				want32G[i%tc.cols] += float64(g32[i])
				want32GX[i%tc.cols] += float64(g32[i]) * float64(x32[i])
			}
			var first []float32
			for threads := 1; threads <= 3; threads++ {
				p := kernels.NewPool(threads)
				work := make([]float64, kernels.ChannelSumsWork(tc.cols))
				sg, sgx := make([]float64, tc.cols), make([]float64, tc.cols)
				kernels.ChannelSumsOn(p, sg, sgx, g, x, tc.rows, tc.cols, work)
				testutil.RequireClose(t, "Σg", sg, wantG, 1e-12, 1e-12)
				testutil.RequireClose(t, "Σg·x", sgx, wantGX, 1e-12, 1e-12)
				sg32, sgx32 := make([]float32, tc.cols), make([]float32, tc.cols)
				kernels.ChannelSumsOn(p, sg32, sgx32, g32, x32, tc.rows, tc.cols, work)
				testutil.RequireClose(t, "float32 Σg", f64s(sg32), want32G, 1e-6, 1e-6)
				testutil.RequireClose(t, "float32 Σg·x", f64s(sgx32), want32GX, 1e-6, 1e-6)
				both := append(append([]float32{}, sg32...), sgx32...)
				if first == nil {
					first = both
				} else {
					for i := range both {
						if math.Float32bits(both[i]) != math.Float32bits(first[i]) {
							t.Fatalf("%d threads: sum %d is %v, %v on one thread", threads, i, both[i], first[i])
						}
					}
				}
				p.Close()
			}
		})
	}
}

func TestActivations(t *testing.T) {
	nan := math.NaN()
	xs := []float64{-4, -2, -0.5, 0, 0.25, 1, 2.5, 7}
	sig := func(v float64) float64 { return 1 / (1 + math.Exp(-v)) }
	tests := []struct {
		name string
		f    func(dst, x []float64) []float64
		want func(x float64) float64
	}{
		// Keras' relu(x, negative_slope, max_value, threshold), term by term
		{"relu6", func(d, x []float64) []float64 { return kernels.ReluClip(d, x, 6, 0, 0) },
			func(x float64) float64 { return min(max(x, 0), 6) }},
		{"leaky_relu_0.3", func(d, x []float64) []float64 { return kernels.ReluClip(d, x, nan, 0.3, 0) },
			func(x float64) float64 { return max(x, 0) - 0.3*max(-x, 0) }},
		{"threshold_1_max_2_slope_0.5", func(d, x []float64) []float64 { return kernels.ReluClip(d, x, 2, 0.5, 1) },
			func(x float64) float64 {
				p := 0.0
				if x > 1 {
					p = x
				}
				return min(max(p, 0), 2) - 0.5*max(1-x, 0)
			}},
		// Keras keeps x in (threshold, 0) for a negative threshold and no max
		{"threshold_-1_no_max", func(d, x []float64) []float64 { return kernels.ReluClip(d, x, nan, 0, -1) },
			func(x float64) float64 {
				if x > -1 {
					return x
				}
				return 0
			}},
		{"elu", func(d, x []float64) []float64 { return kernels.Elu(d, x, 1, 1) },
			func(x float64) float64 {
				if x > 0 {
					return x
				}
				return math.Exp(x) - 1
			}},
		{"selu", func(d, x []float64) []float64 { return kernels.Elu(d, x, 1.6732632423543772, 1.0507009873554805) },
			func(x float64) float64 {
				if x > 0 {
					return 1.0507009873554805 * x
				}
				return 1.0507009873554805 * 1.6732632423543772 * (math.Exp(x) - 1)
			}},
		{"silu", kernels.Silu[float64], func(x float64) float64 { return x * sig(x) }},
		{"hard_swish", kernels.HardSwish[float64], func(x float64) float64 { return x * min(max(x+3, 0), 6) / 6 }},
		{"softplus", kernels.Softplus[float64], func(x float64) float64 { return math.Log(1 + math.Exp(x)) }},
		{"softsign", kernels.Softsign[float64], func(x float64) float64 { return x / (1 + math.Abs(x)) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := make([]float64, len(xs))
			for i, x := range xs {
				want[i] = tc.want(x)
			}
			testutil.RequireClose(t, tc.name, tc.f(make([]float64, len(xs)), xs), want, 1e-15, 1e-15)
		})
	}
}

// TestActivationGrads checks each gradient kernel against a central
// difference of its activation away from the kinks, and ReluClip's two
// forms (from the input, from the output) against each other.
func TestActivationGrads(t *testing.T) {
	xs := []float64{-4.1, -2.3, -0.7, -0.01, 0.3, 1.1, 2.7, 5.9, 7.3}
	g := []float64{0.3, -1.2, 0.7, 1.9, -0.4, 1.1, -2.2, 0.8, 1.5}
	tests := []struct {
		name string
		f    func(dst, x []float64) []float64
		grad func(dst, x, y, g []float64) []float64
	}{
		{"relu_clip/input", func(d, x []float64) []float64 { return kernels.ReluClip(d, x, 6, 0.1, 0.5) },
			func(d, x, y, g []float64) []float64 { return kernels.ReluClipGrad(d, x, g, 6, 0.1, 0.5, false) }},
		{"relu_clip/output", func(d, x []float64) []float64 { return kernels.ReluClip(d, x, 6, 0.2, 0) },
			func(d, x, y, g []float64) []float64 { return kernels.ReluClipGrad(d, y, g, 6, 0.2, 0, true) }},
		{"relu_clip/input_same_as_output", func(d, x []float64) []float64 { return kernels.ReluClip(d, x, 6, 0.2, 0) },
			func(d, x, y, g []float64) []float64 { return kernels.ReluClipGrad(d, x, g, 6, 0.2, 0, false) }},
		{"elu", func(d, x []float64) []float64 { return kernels.Elu(d, x, 1.5, 1.2) },
			func(d, x, y, g []float64) []float64 { return kernels.EluGrad(d, y, g, 1.5, 1.2) }},
		{"silu", kernels.Silu[float64], func(d, x, y, g []float64) []float64 { return kernels.SiluGrad(d, x, g) }},
		{"hard_swish", kernels.HardSwish[float64], func(d, x, y, g []float64) []float64 { return kernels.HardSwishGrad(d, x, g) }},
		{"softplus", kernels.Softplus[float64], func(d, x, y, g []float64) []float64 { return kernels.SoftplusGrad(d, x, g) }},
		{"softsign", kernels.Softsign[float64], func(d, x, y, g []float64) []float64 { return kernels.SoftsignGrad(d, x, g) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			y := tc.f(make([]float64, len(xs)), xs)
			got := tc.grad(make([]float64, len(xs)), xs, y, g)
			const h = 1e-6
			want := make([]float64, len(xs))
			for i, x := range xs {
				p := tc.f(make([]float64, 1), []float64{x + h})
				m := tc.f(make([]float64, 1), []float64{x - h})
				want[i] = g[i] * (p[0] - m[0]) / (2 * h)
			}
			testutil.RequireClose(t, tc.name, got, want, 1e-6, 1e-8)
		})
	}
}

// naiveMoments is the two-pass mean and biased variance of each column.
func naiveMoments(x []float64, rows, cols int) []float64 {
	want := make([]float64, 2*cols)
	for c := 0; c < cols; c++ {
		var s float64
		for i := 0; i < rows; i++ {
			s += x[i*cols+c]
		}
		m := s / float64(rows)
		var v float64
		for i := 0; i < rows; i++ {
			d := x[i*cols+c] - m
			v += d * d
		}
		want[c], want[cols+c] = m, v/float64(rows)
	}
	return want
}

// TestVisionNoAllocs: the vision kernels allocate nothing (the runtime's
// zero-allocation step rests on it), on the worker pool too.
func TestVisionNoAllocs(t *testing.T) {
	defer kernels.SetThreads(kernels.Threads())
	kernels.SetThreads(2)
	r := rng(11)
	type conv struct {
		name string
		g    kernels.ConvGeom
		f    int
	}
	convs := []conv{
		{"dilated", kernels.NewConvGeneralGeom(4, 9, 9, 4, 3, 3, 1, 1, 2, 2, 1, true), 6},
		{"grouped", kernels.NewConvGeneralGeom(4, 9, 9, 4, 3, 3, 1, 1, 1, 1, 2, true), 6},
		{"depthwise", kernels.NewConvGeneralGeom(4, 9, 9, 4, 3, 3, 1, 1, 1, 1, 4, true), 8},
	}
	calls := map[string]func(){}
	for _, c := range convs {
		g, f := c.g, c.f
		x := f32(testutil.RandFloats(r, g.N*g.H*g.W*g.C))
		w := f32(testutil.RandFloats(r, g.KH*g.KW*(g.C/max(g.Groups, 1))*f))
		y := make([]float32, g.N*g.OH*g.OW*f)
		work := make([]float32, kernels.ConvGeneralWork(g, f, 2))
		x64, w64, y64 := f64s(x), f64s(w), f64s(y)
		work64 := make([]float64, len(work))
		calls[c.name+"/Conv2D"] = func() { kernels.Conv2D(y, x, w, work, g, f) }
		calls[c.name+"/Conv2DBackpropInput"] = func() { kernels.Conv2DBackpropInput(x, y, w, work, g, f) }
		calls[c.name+"/Conv2DBackpropFilter"] = func() { kernels.Conv2DBackpropFilter(w, x, y, work, g, f) }
		calls[c.name+"/Conv2D float64"] = func() { kernels.Conv2D(y64, x64, w64, work64, g, f) }
		calls[c.name+"/Conv2DBackpropFilter float64"] = func() { kernels.Conv2DBackpropFilter(w64, x64, y64, work64, g, f) }
	}
	rg := kernels.ResizeGeom{N: 2, H: 4, W: 5, C: 3, OH: 8, OW: 10}
	small, big := make([]float32, 2*4*5*3), make([]float32, 2*8*10*3)
	calls["ResizeBilinear"] = func() { kernels.ResizeBilinear(big, small, rg) }
	calls["ResizeBilinearGrad"] = func() { kernels.ResizeBilinearGrad(small, big, rg) }
	// a convolution that sums its output's moments: Winograd's epilogue
	// and the pass after im2col, on two threads
	cg := kernels.ConvGeom{N: 4, H: 8, W: 8, C: 16, KH: 3, KW: 3, SH: 1, SW: 1, PadTop: 1, PadLeft: 1, OH: 8, OW: 8}
	cx, cw, cy := f32(testutil.RandFloats(r, 4*8*8*16)), f32(testutil.RandFloats(r, 9*16*16)), make([]float32, 4*8*8*16)
	cblock := kernels.MomentsBlock(4*8*8, 8*8)
	cwork, cmom, cmwork := make([]float32, 1<<18), make([]float32, 32), make([]float64, kernels.MomentsWork(4*8*8, 16, cblock))
	cpool := kernels.NewPool(2)
	defer cpool.Close()
	for _, algo := range []kernels.ConvAlgo{kernels.ConvWinograd4, kernels.ConvIm2col} {
		calls["ConvMomentsOn/"+algo.String()] = func() { kernels.ConvMomentsOn(cpool, algo, cy, cx, cw, cwork, cg, 16, cmom, cmwork) }
	}
	mx := f32(testutil.RandFloats(r, 4096*16))
	mblock := kernels.MomentsBlock(4096, 64)
	mdst, mwork := make([]float32, 32), make([]float64, kernels.MomentsWork(4096, 16, mblock))
	calls["Moments"] = func() { kernels.Moments(mdst, mx, 4096, 16, mblock, mwork) }
	mx64 := f64s(mx)
	mdst64 := make([]float64, 32)
	calls["Moments float64"] = func() { kernels.Moments(mdst64, mx64, 4096, 16, mblock, mwork) }
	a, b := f32(testutil.RandFloats(r, 100)), make([]float32, 100)
	calls["ReluClip"] = func() { kernels.ReluClip(b, a, 6, 0.1, 0) }
	calls["ReluClipGrad"] = func() { kernels.ReluClipGrad(b, a, a, 6, 0.1, 0, true) }
	calls["Elu"] = func() { kernels.Elu(b, a, 1, 1) }
	calls["EluGrad"] = func() { kernels.EluGrad(b, a, a, 1, 1) }
	calls["Silu"] = func() { kernels.Silu(b, a) }
	calls["SiluGrad"] = func() { kernels.SiluGrad(b, a, a) }
	calls["HardSwish"] = func() { kernels.HardSwish(b, a) }
	calls["HardSwishGrad"] = func() { kernels.HardSwishGrad(b, a, a) }
	calls["Softplus"] = func() { kernels.Softplus(b, a) }
	calls["SoftplusGrad"] = func() { kernels.SoftplusGrad(b, a, a) }
	calls["Softsign"] = func() { kernels.Softsign(b, a) }
	calls["SoftsignGrad"] = func() { kernels.SoftsignGrad(b, a, a) }
	for name, call := range calls {
		if n := testing.AllocsPerRun(10, call); n != 0 {
			t.Errorf("%s: %v allocations per call, want 0", name, n)
		}
	}
}

// BenchmarkBatchNormSums times BatchNormalization's sums on the
// ResNet-20's activations at batch 128 on 2 threads: the moments alone
// (over an output in the cache), the F(4×4, 3×3) forward product alone
// and with its moments summed as it writes each image (ConvMomentsOn),
// and the backward pass's channel sums of g and g·x.
func BenchmarkBatchNormSums(b *testing.B) {
	r := rng(5)
	for _, c := range []struct{ hw, c int }{{28, 16}, {14, 32}, {7, 64}} {
		g := kernels.ConvGeom{N: 128, H: c.hw, W: c.hw, C: c.c, KH: 3, KW: 3, SH: 1, SW: 1, PadTop: 1, PadLeft: 1, OH: c.hw, OW: c.hw}
		rows := 128 * c.hw * c.hw
		x, w := f32(testutil.RandFloats(r, rows*c.c)), f32(testutil.RandFloats(r, 9*c.c*c.c))
		y, gy := make([]float32, rows*c.c), f32(testutil.RandFloats(r, rows*c.c))
		block := kernels.MomentsBlock(rows, c.hw*c.hw)
		mwork := make([]float64, kernels.MomentsWork(rows, c.c, block))
		m, sg, sgx, swork := make([]float32, 2*c.c), make([]float32, c.c), make([]float32, c.c), make([]float64, kernels.ChannelSumsWork(c.c))
		work := make([]float32, 1<<21)
		p := kernels.NewPool(2)
		name := fmt.Sprintf("%dx%dx%d/", c.hw, c.hw, c.c)
		b.Run(name+"moments", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				kernels.MomentsOn(p, m, y, rows, c.c, block, mwork)
			}
		})
		b.Run(name+"winograd4", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				kernels.ConvOn(p, kernels.ConvForward, kernels.ConvWinograd4, y, x, w, work, g, c.c)
			}
		})
		b.Run(name+"winograd4+moments", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				kernels.ConvMomentsOn(p, kernels.ConvWinograd4, y, x, w, work, g, c.c, m, mwork)
			}
		})
		b.Run(name+"channel_sums", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				kernels.ChannelSumsOn(p, sg, sgx, gy, y, rows, c.c, swork)
			}
		})
		p.Close()
	}
}
