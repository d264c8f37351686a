package kernels

import "math"

// The data kernels of the vision ops: bilinear resizing and batch moments.

// ResizeGeom is the geometry of a resize of an NHWC tensor [N, H, W, C] to
// [N, OH, OW, C].
type ResizeGeom struct {
	N, H, W, C, OH, OW int
}

// lerpAt returns, for output position o of out over in input positions,
// the two input positions it reads and the weight of the second, with
// half-pixel centers as TensorFlow's tf.image.resize (bilinear, no
// antialiasing): p = (o + 0.5)·in/out - 0.5, lo = max(floor(p), 0),
// hi = min(ceil(p), in-1), weight p - floor(p).
func lerpAt(o, in, out int) (lo, hi int, w float64) {
	p := (float64(o)+0.5)*float64(in)/float64(out) - 0.5
	f := math.Floor(p)
	lo, hi = max(int(f), 0), min(int(math.Ceil(p)), in-1)
	return lo, hi, p - f
}

func (g ResizeGeom) check(fn string, lenX, lenY int, xName, yName string) {
	if g.N < 0 || g.H <= 0 || g.W <= 0 || g.C < 0 || g.OH <= 0 || g.OW <= 0 {
		panicf("%s: invalid geometry %+v", fn, g)
	}
	checkLen(fn, xName, lenX, g.N*g.H*g.W*g.C)
	checkLen(fn, yName, lenY, g.N*g.OH*g.OW*g.C)
}

// ResizeBilinear sets dst [N, OH, OW, C] to x [N, H, W, C] resized by
// bilinear interpolation with half-pixel centers (see lerpAt), computed as
// TensorFlow's kernel does: top = a + (b - a)·wx, bottom = c + (d - c)·wx,
// top + (bottom - top)·wy. It returns dst; dst must not overlap x.
func ResizeBilinear[T Float](dst, x []T, g ResizeGeom) []T {
	g.check("ResizeBilinear", len(x), len(dst), "x", "dst")
	for n := 0; n < g.N; n++ {
		xi := x[n*g.H*g.W*g.C : (n+1)*g.H*g.W*g.C]
		for oy := 0; oy < g.OH; oy++ {
			y0, y1, wy64 := lerpAt(oy, g.H, g.OH)
			wy := T(wy64)
			for ox := 0; ox < g.OW; ox++ {
				x0, x1, wx64 := lerpAt(ox, g.W, g.OW)
				wx := T(wx64)
				a, b := xi[(y0*g.W+x0)*g.C:][:g.C], xi[(y0*g.W+x1)*g.C:][:g.C]
				c, d := xi[(y1*g.W+x0)*g.C:][:g.C], xi[(y1*g.W+x1)*g.C:][:g.C]
				out := dst[((n*g.OH+oy)*g.OW+ox)*g.C:][:g.C]
				for i := range out {
					top := a[i] + (b[i]-a[i])*wx
					bottom := c[i] + (d[i]-c[i])*wx
					out[i] = top + (bottom-top)*wy
				}
			}
		}
	}
	return dst
}

// ResizeBilinearGrad sets dx [N, H, W, C] to the gradient of
// Σ dy·ResizeBilinear(x) with respect to x: each dy cell adds its value
// times each of its four weights into the cell it read. It returns dx,
// which must not overlap dy.
func ResizeBilinearGrad[T Float](dx, dy []T, g ResizeGeom) []T {
	g.check("ResizeBilinearGrad", len(dx), len(dy), "dx", "dy")
	clear(dx)
	for n := 0; n < g.N; n++ {
		di := dx[n*g.H*g.W*g.C : (n+1)*g.H*g.W*g.C]
		for oy := 0; oy < g.OH; oy++ {
			y0, y1, wy64 := lerpAt(oy, g.H, g.OH)
			wy := T(wy64)
			for ox := 0; ox < g.OW; ox++ {
				x0, x1, wx64 := lerpAt(ox, g.W, g.OW)
				wx := T(wx64)
				a, b := di[(y0*g.W+x0)*g.C:][:g.C], di[(y0*g.W+x1)*g.C:][:g.C]
				c, d := di[(y1*g.W+x0)*g.C:][:g.C], di[(y1*g.W+x1)*g.C:][:g.C]
				src := dy[((n*g.OH+oy)*g.OW+ox)*g.C:][:g.C]
				for i, v := range src {
					top, bottom := v*(1-wy), v*wy
					a[i] += top * (1 - wx)
					b[i] += top * wx
					c[i] += bottom * (1 - wx)
					d[i] += bottom * wx
				}
			}
		}
	}
	return dx
}

// MomentsWork returns the float64 workspace Moments needs for cols
// channels.
func MomentsWork(cols int) int { return momentsParts * 2 * cols }

// momentsParts is the fixed number of row ranges Moments sums apart (so
// its rounding does not depend on the threads).
const momentsParts = 2

type momentsJob[T Float] struct {
	x          []T
	rows, cols int
	work       []float64
}

// MomentsOn sets dst [2, cols] to the mean (row 0) and the biased variance
// (row 1) of each column of x [rows, cols], and returns dst. It sums in
// float64, shifted by the column's first value (so a large mean costs no
// precision), over two fixed halves of the rows at once on pool p, in work
// (MomentsWork(cols) float64s). rows must be positive.
func MomentsOn[T Float](p *Pool, dst, x []T, rows, cols int, work []float64) []T {
	const fn = "Moments"
	if rows <= 0 || cols < 0 {
		panicf("%s: invalid size %d×%d", fn, rows, cols)
	}
	checkLen(fn, "x", len(x), rows*cols)
	checkLen(fn, "dst", len(dst), 2*cols)
	if len(work) < MomentsWork(cols) {
		panicf("%s: len(work) = %d, want at least %d", fn, len(work), MomentsWork(cols))
	}
	p.calls.momentsMu.Lock()
	var j *momentsJob[T]
	part := momentsPart64 // a plain function: a generic one's value would allocate
	if j32, ok := any(&p.calls.moments32).(*momentsJob[T]); ok {
		j, part = j32, momentsPart32
	} else {
		j = any(&p.calls.moments64).(*momentsJob[T])
	}
	*j = momentsJob[T]{x: x, rows: rows, cols: cols, work: work}
	ParallelOn(p, momentsParts, part, j)
	*j = momentsJob[T]{}
	p.calls.momentsMu.Unlock()
	n := float64(rows)
	for c := 0; c < cols; c++ {
		s1, s2 := partSums(work, cols, c)
		m := s1 / n
		dst[c] = T(float64(x[c]) + m)
		dst[cols+c] = T(max(s2/n-m*m, 0))
	}
	return dst
}

// ChannelSumsWork returns the float64 workspace ChannelSumsOn needs for
// cols channels.
func ChannelSumsWork(cols int) int { return momentsParts * 2 * cols }

type sumsJob[T Float] struct {
	g, x       []T
	rows, cols int
	work       []float64
}

// ChannelSumsOn sets sg[c] = Σ_r g[r, c] and sgx[c] = Σ_r g[r, c]·x[r, c]
// for g and x [rows, cols], and returns sg: one pass over both for what
// would be a reduction of g and a reduction of a product, the gradients of
// a per-channel shift and scale (BatchNormalization's beta and gamma, and
// through them its statistics). It sums in float64 (each product too),
// over two fixed halves of the rows at once on pool p (so the rounding
// does not depend on the threads), in work (ChannelSumsWork(cols)
// float64s).
func ChannelSumsOn[T Float](p *Pool, sg, sgx, g, x []T, rows, cols int, work []float64) []T {
	const fn = "ChannelSums"
	if rows < 0 || cols < 0 {
		panicf("%s: invalid size %d×%d", fn, rows, cols)
	}
	checkLen(fn, "g", len(g), rows*cols)
	checkLen(fn, "x", len(x), rows*cols)
	checkLen(fn, "sg", len(sg), cols)
	checkLen(fn, "sgx", len(sgx), cols)
	if len(work) < ChannelSumsWork(cols) {
		panicf("%s: len(work) = %d, want at least %d", fn, len(work), ChannelSumsWork(cols))
	}
	p.calls.momentsMu.Lock()
	var j *sumsJob[T]
	part := sumsPart64 // a plain function: a generic one's value would allocate
	if j32, ok := any(&p.calls.sums32).(*sumsJob[T]); ok {
		j, part = j32, sumsPart32
	} else {
		j = any(&p.calls.sums64).(*sumsJob[T])
	}
	*j = sumsJob[T]{g: g, x: x, rows: rows, cols: cols, work: work}
	ParallelOn(p, momentsParts, part, j)
	*j = sumsJob[T]{}
	p.calls.momentsMu.Unlock()
	for c := 0; c < cols; c++ {
		s1, s2 := partSums(work, cols, c)
		sg[c], sgx[c] = T(s1), T(s2)
	}
	return sg
}

// partSums adds up column c of the parts' two rows of sums in work (as
// momentsPart and sumsPart leave them), in part order.
func partSums(work []float64, cols, c int) (s1, s2 float64) {
	for p := 0; p < momentsParts; p++ {
		s1 += work[(2*p)*cols+c]
		s2 += work[(2*p+1)*cols+c]
	}
	return s1, s2
}

func sumsPart32(arg any, p int) { sumsPart[float32](arg, p) }
func sumsPart64(arg any, p int) { sumsPart[float64](arg, p) }

// sumsPart sums part p of the rows into its two rows of work.
func sumsPart[T Float](arg any, p int) {
	j := arg.(*sumsJob[T])
	cols := j.cols
	s1 := j.work[(2*p)*cols : (2*p+1)*cols]
	s2 := j.work[(2*p+1)*cols : (2*p+2)*cols]
	clear(s1)
	clear(s2)
	r0, r1 := j.rows*p/momentsParts, j.rows*(p+1)/momentsParts
	c0 := 0 // the channels summed in float64 vectors, sixteen at a time
	if g32, ok := any(j.g).([]float32); ok && r1 > r0 && sumsSIMD(s1, s2, g32[r0*cols:], any(j.x).([]float32)[r0*cols:], r1-r0, cols, cols/16) {
		c0 = cols &^ 15
	}
	for r := r0; r < r1; r++ {
		gr, xr := j.g[r*cols:(r+1)*cols], j.x[r*cols:(r+1)*cols]
		for c := c0; c < cols; c++ {
			s1[c] += float64(gr[c])
			s2[c] += float64(gr[c]) * float64(xr[c])
		}
	}
}

func momentsPart32(arg any, p int) { momentsPart[float32](arg, p) }
func momentsPart64(arg any, p int) { momentsPart[float64](arg, p) }

// momentsPart sums part p of the rows, shifted by row 0, into its two
// rows of work.
func momentsPart[T Float](arg any, p int) {
	j := arg.(*momentsJob[T])
	cols := j.cols
	s1 := j.work[(2*p)*cols : (2*p+1)*cols]
	s2 := j.work[(2*p+1)*cols : (2*p+2)*cols]
	clear(s1)
	clear(s2)
	shift := j.x[:cols]
	r0, r1 := j.rows*p/momentsParts, j.rows*(p+1)/momentsParts
	c0 := 0 // the channels summed in float64 vectors, sixteen at a time
	if x32, ok := any(j.x).([]float32); ok && r1 > r0 && momentsSIMD(s1, s2, x32[r0*cols:], x32[:cols], r1-r0, cols, cols/16) {
		c0 = cols &^ 15
	}
	for r := r0; r < r1; r++ {
		row := j.x[r*cols : (r+1)*cols]
		for c := c0; c < cols; c++ {
			d := float64(row[c]) - float64(shift[c])
			s1[c] += d
			s2[c] += d * d
		}
	}
}
