package kerneltest

import (
	"math"
	"testing"

	"github.com/headroom-ml/headroom/kernels"
)

// The pooling definitions below visit each window cell by cell, testing
// every padded position against the input bounds, in float64: nothing is
// shared with the kernels' window walks, vector loops or image halves.
//
//	x: [N, H, W, C] -> y: [N, OH, OW, C]
//
// y[n, oh, ow, c] is taken over the cells (oh·SH - PadTop + kh, ow·SW -
// PadLeft + kw), kh < KH, kw < KW, that lie inside the input; padding
// takes no part.

// windowCase is one pooling geometry of the suite.
type windowCase struct {
	n, h, w, c, kh, kw, sh, sw int
	same                       bool
}

func (p windowCase) geom() kernels.ConvGeom {
	return kernels.NewConvGeom(p.n, p.h, p.w, p.c, p.kh, p.kw, p.sh, p.sw, p.same)
}

func (p windowCase) String() string {
	pad := "valid"
	if p.same {
		pad = "same"
	}
	return name("%dx%dx%dx%d/k%dx%d/s%dx%d/%s", p.n, p.h, p.w, p.c, p.kh, p.kw, p.sh, p.sw, pad)
}

// poolCases cover odd sizes (1, 7, 33 and C = 1023), strides 1 and 2
// (and mixed), valid and same padding, windows larger than the input,
// channel counts the vector loops take whole (16, 64) or in part (35, 1023),
// windows that tile the input (each dx cell written once), a window of 72
// cells (too large for the vector loops), a batch large enough to split in
// halves on two threads, and empty tensors.
var poolCases = []windowCase{
	{1, 1, 1, 1, 1, 1, 1, 1, false},
	{1, 7, 5, 1, 3, 3, 1, 1, false},
	{3, 7, 5, 3, 3, 2, 1, 1, true},
	{3, 9, 6, 3, 3, 2, 2, 2, false},
	{1, 33, 7, 1, 3, 3, 2, 2, true},
	{3, 7, 33, 7, 3, 2, 1, 2, true},
	{2, 3, 4, 5, 5, 4, 1, 1, true},
	{3, 4, 6, 16, 2, 2, 2, 2, false},
	{3, 5, 7, 35, 2, 2, 2, 2, false},
	{2, 5, 5, 32, 3, 3, 1, 1, true},
	{2, 7, 6, 48, 3, 2, 2, 1, true},
	{1, 9, 9, 16, 9, 8, 1, 1, false},
	{1, 3, 4, 1023, 2, 2, 1, 2, true},
	{2, 16, 16, 64, 2, 2, 2, 2, false},
	{0, 5, 5, 3, 2, 2, 1, 1, true},
	{2, 5, 5, 0, 2, 2, 1, 1, true},
	{2, 2, 5, 3, 3, 3, 1, 1, false},
}

// eachCell calls visit with the offset in x of each input cell of the
// window of output (n, oh, ow) in channel c, in row-major window order.
func eachCell(g kernels.ConvGeom, n, oh, ow, c int, visit func(i int)) {
	for kh := 0; kh < g.KH; kh++ {
		for kw := 0; kw < g.KW; kw++ {
			ih, iw := oh*g.SH-g.PadTop+kh, ow*g.SW-g.PadLeft+kw
			if ih < 0 || ih >= g.H || iw < 0 || iw >= g.W {
				continue // padding takes no part
			}
			visit(((n*g.H+ih)*g.W+iw)*g.C + c)
		}
	}
}

// eachOutput calls visit with the offset in y of each output (n, oh, ow, c).
func eachOutput(g kernels.ConvGeom, visit func(n, oh, ow, c, o int)) {
	for n := 0; n < g.N; n++ {
		for oh := 0; oh < g.OH; oh++ {
			for ow := 0; ow < g.OW; ow++ {
				for c := 0; c < g.C; c++ {
					visit(n, oh, ow, c, ((n*g.OH+oh)*g.OW+ow)*g.C+c)
				}
			}
		}
	}
}

// maxPoolArg returns, for each output, the offset in x of the cell max
// pooling selects: the first maximum in row-major window order, or the
// first NaN if the window holds one (so a NaN propagates).
func maxPoolArg(x []float32, g kernels.ConvGeom) []int {
	arg := make([]int, g.N*g.OH*g.OW*g.C)
	eachOutput(g, func(n, oh, ow, c, o int) {
		best := -1
		eachCell(g, n, oh, ow, c, func(i int) {
			if best < 0 {
				best = i
				return
			}
			v, b := x[i], x[best]
			if v > b || (v != v && b == b) {
				best = i
			}
		})
		arg[o] = best
	})
	return arg
}

// maxPoolGradRef returns the gradient of Σ dy·MaxPool2D(x): each dy
// element added to the cell its window selects (with relu, only where that
// cell's value is above 0), and the scale of each sum: Σ |dy| of the
// elements added.
func maxPoolGradRef(x, dy []float32, g kernels.ConvGeom, relu bool) (want []float32, scale []float64) {
	dx, s := make([]float64, len(x)), make([]float64, len(x))
	for o, i := range maxPoolArg(x, g) {
		if relu && !(x[i] > 0) {
			continue
		}
		dx[i] += float64(dy[o])
		s[i] += math.Abs(float64(dy[o]))
	}
	return narrow(dx), s
}

// avgPoolRef returns the mean over each window's cells inside the input and
// the scale: the mean of their absolute values.
func avgPoolRef(x []float32, g kernels.ConvGeom) (want []float32, scale []float64) {
	y, s := make([]float64, g.N*g.OH*g.OW*g.C), make([]float64, g.N*g.OH*g.OW*g.C)
	eachOutput(g, func(n, oh, ow, c, o int) {
		count := 0
		eachCell(g, n, oh, ow, c, func(i int) {
			y[o] += float64(x[i])
			s[o] += math.Abs(float64(x[i]))
			count++
		})
		y[o] /= float64(count)
		s[o] /= float64(count)
	})
	return narrow(y), s
}

// avgPoolGradRef returns the gradient of Σ dy·AvgPool2D(x): dy divided by
// its window's count added to each of the window's cells, and the scale of
// each sum.
func avgPoolGradRef(dy []float32, g kernels.ConvGeom) (want []float32, scale []float64) {
	dx, s := make([]float64, g.N*g.H*g.W*g.C), make([]float64, g.N*g.H*g.W*g.C)
	eachOutput(g, func(n, oh, ow, c, o int) {
		count := 0
		eachCell(g, n, oh, ow, c, func(int) { count++ })
		d := float64(dy[o]) / float64(count)
		eachCell(g, n, oh, ow, c, func(i int) {
			dx[i] += d
			s[i] += math.Abs(d)
		})
	})
	return narrow(dx), s
}

func narrow(x []float64) []float32 {
	y := make([]float32, len(x))
	for i, v := range x {
		y[i] = float32(v)
	}
	return y
}

// poolValues are the values of the max-pooling inputs: few, so that windows
// hold ties (the first maximum must be selected, -0 and +0 included), and
// with NaN in the "nan" data.
var poolValues = []float32{-1, float32(math.Copysign(0, -1)), 0, 1, 2, float32(math.NaN())}

// maxPoolInput returns an input of g for data "ties" (poolValues without
// NaN) or "nan" (with it), and dy in [-1, 1) with some -0.
func maxPoolInput(seed uint64, g kernels.ConvGeom, data string) (x, dy []float32) {
	r := newRand(seed)
	choices := len(poolValues) - 1
	if data == "nan" {
		choices++
	}
	x = make([]float32, g.N*g.H*g.W*g.C)
	for i := range x {
		x[i] = poolValues[r.IntN(choices)]
	}
	dy = uniform(r, g.N*g.OH*g.OW*g.C, -1, 1)
	for i := 0; i < len(dy); i += 7 {
		dy[i] = float32(math.Copysign(0, -1))
	}
	return x, dy
}

// compareBits fails t unless got holds want's bits element for element,
// any NaN matching any NaN.
func compareBits(t *testing.T, where string, got, want []float32) {
	t.Helper()
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
			t.Errorf("%s: element %d: got %v (%#08x), want %v (%#08x)", where, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
			return
		}
	}
}

func testMaxPool(t *testing.T, f PoolFunc) {
	for i, c := range poolCases {
		g := c.geom()
		for _, data := range []string{"ties", "nan"} {
			where := c.String() + "/" + data
			x, _ := maxPoolInput(uint64(200+i), g, data)
			want := make([]float32, g.N*g.OH*g.OW*g.C)
			for o, a := range maxPoolArg(x, g) {
				want[o] = x[a]
			}
			o, xs := newOut32(len(want)), clone(x)
			got := f(o.dst(), x, g)
			o.check(t, where, got)
			unchanged(t, where, "x", xs, x)
			compareBits(t, where, o.dst(), want)
		}
	}
}

func testMaxPoolGrad(t *testing.T, f MaxPoolGradFunc, relu bool) {
	for i, c := range poolCases {
		g := c.geom()
		for _, data := range []string{"ties", "nan"} {
			where := c.String() + "/" + data
			x, dy := maxPoolInput(uint64(300+i), g, data)
			want, scale := maxPoolGradRef(x, dy, g, relu)
			o, xs, dys := newOut32(len(x)), clone(x), clone(dy)
			got := f(o.dst(), x, dy, g)
			o.check(t, where, got)
			unchanged(t, where, "x", xs, x)
			unchanged(t, where, "dy", dys, dy)
			compare(t, where, o.dst(), want, scale)
		}
	}
}

func testAvgPool(t *testing.T, f PoolFunc) {
	for i, c := range poolCases {
		g := c.geom()
		where := c.String()
		x := uniform(newRand(uint64(400+i)), g.N*g.H*g.W*g.C, -2, 2)
		want, scale := avgPoolRef(x, g)
		o, xs := newOut32(len(want)), clone(x)
		got := f(o.dst(), x, g)
		o.check(t, where, got)
		unchanged(t, where, "x", xs, x)
		compare(t, where, o.dst(), want, scale)
	}
}

func testAvgPoolGrad(t *testing.T, f AvgPoolGradFunc) {
	for i, c := range poolCases {
		g := c.geom()
		where := c.String()
		dy := uniform(newRand(uint64(500+i)), g.N*g.OH*g.OW*g.C, -2, 2)
		want, scale := avgPoolGradRef(dy, g)
		o, dys := newOut32(len(want)), clone(dy)
		got := f(o.dst(), dy, g)
		o.check(t, where, got)
		unchanged(t, where, "dy", dys, dy)
		compare(t, where, o.dst(), want, scale)
	}
}
