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

// The groups Moments sums apart: whole images (or rows where there are no
// images), at least momentsMinRows rows a group and at most
// momentsMaxGroups groups.
const (
	momentsMinRows   = 128
	momentsMaxGroups = 256
)

// MomentsBlock returns the rows of each group that Moments sums apart for
// rows rows made of images of image rows each (1 where the rows are not
// images: a dense layer's batch): whole images, at least 128 rows where
// the images hold that many, and at most 256 groups. The groups depend on the
// sizes alone, never on the threads, so the rounding does not either; a
// convolution that sums its output's moments as it writes them
// (ConvMomentsOn) takes the same groups, so the two give the same bits.
func MomentsBlock(rows, image int) int {
	image = max(image, 1)
	n := max(ceilDiv(rows, image), 1)
	k := max(ceilDiv(n, momentsMaxGroups), ceilDiv(momentsMinRows, image))
	return min(k, n) * image
}

// MomentsWork returns the float64 workspace Moments needs for rows rows
// of cols channels summed in groups of block rows (MomentsBlock): two
// sums a channel for each group, and two for adding them up.
func MomentsWork(rows, cols, block int) int {
	return (max(ceilDiv(rows, max(block, 1)), 1) + 1) * 2 * cols
}

type momentsJob[T Float] struct {
	dst, x            []T
	rows, cols, block int
	work              []float64
	done              wgSummed // the groups a convolution summed already
	parts             int      // the parts the groups split into
}

// wgSummed says which groups of k images winogradMoments summed, with
// chunks of chunk tiles over n images of img tiles (wgGroupSummed); the
// zero value none.
type wgSummed struct{ chunk, k, n, img int }

func (w wgSummed) has(g int) bool { return wgGroupSummed(g, w.k, w.n, w.img, w.chunk) }

// MomentsOn sets dst [2, cols] to the mean (row 0) and the biased variance
// (row 1) of each column of x [rows, cols], and returns dst. It sums each
// group of block rows (MomentsBlock) in float64, shifted by the group's
// first row (so a large mean costs no precision), the groups at once on
// pool p, into work (MomentsWork float64s); then it adds the groups up in
// order, each moved to group 0's shift (momentsCombine). rows must be
// positive.
func MomentsOn[T Float](p *Pool, dst, x []T, rows, cols, block int, work []float64) []T {
	checkMoments("Moments", len(dst), len(x), rows, cols, block, len(work))
	return moments(p, dst, x, rows, cols, block, work, wgSummed{})
}

// moments sets dst to the moments of x [rows, cols] from its groups of
// block rows, and returns dst: it sums into work each group but those
// done says are summed already (momentsGroup, the groups at once on pool
// p), then adds them up a block of 16 columns at a time, the blocks at
// once where there are many groups and columns.
func moments[T Float](p *Pool, dst, x []T, rows, cols, block int, work []float64, done wgSummed) []T {
	p.calls.momentsMu.Lock()
	defer p.calls.momentsMu.Unlock()
	var j *momentsJob[T]
	part, combine := momentsPart64, momentsCombine64 // plain functions: a generic one's value would allocate
	if j32, ok := any(&p.calls.moments32).(*momentsJob[T]); ok {
		j, part, combine = j32, momentsPart32, momentsCombine32
	} else {
		j = any(&p.calls.moments64).(*momentsJob[T])
	}
	groups := ceilDiv(rows, block)
	// a part of consecutive groups for each thread, twice over (a part
	// handed to a thread costs an atomic add on a shared counter)
	parts := min(groups, 2*p.Threads())
	*j = momentsJob[T]{dst: dst, x: x, rows: rows, cols: cols, block: block, work: work, done: done, parts: parts}
	ParallelOn(p, parts, part, j)
	if blocks := ceilDiv(cols, 16); groups*cols >= momentsCombineMin && blocks > 1 {
		ParallelOn(p, blocks, combine, j)
	} else {
		momentsCombine(dst, x, rows, cols, block, work, 0, cols)
	}
	*j = momentsJob[T]{}
	return dst
}

// momentsCombineMin is the fewest groups × columns whose adding up splits
// over the threads (a block of 16 columns each).
const momentsCombineMin = 4096

func momentsCombine32(arg any, b int) { momentsCombineBlock[float32](arg, b) }
func momentsCombine64(arg any, b int) { momentsCombineBlock[float64](arg, b) }

// momentsCombineBlock adds up block b of 16 columns.
func momentsCombineBlock[T Float](arg any, b int) {
	j := arg.(*momentsJob[T])
	momentsCombine(j.dst, j.x, j.rows, j.cols, j.block, j.work, 16*b, min(16*(b+1), j.cols))
}

// checkMoments panics unless dst, x and work (by their lengths) fit rows
// rows of cols channels in groups of block rows.
func checkMoments(fn string, lenDst, lenX, rows, cols, block, lenWork int) {
	if rows <= 0 || cols < 0 || block <= 0 {
		panicf("%s: invalid size %d×%d in groups of %d rows", fn, rows, cols, block)
	}
	checkLen(fn, "x", lenX, rows*cols)
	checkLen(fn, "moments", lenDst, 2*cols)
	if lenWork < MomentsWork(rows, cols, block) {
		panicf("%s: len(work) = %d, want at least %d", fn, lenWork, MomentsWork(rows, cols, block))
	}
}

// momentsCombine sets columns [c0, c1) of dst to the mean and variance
// from the groups' sums in work (momentsGroup), added up in group order. Each
// group's sums move from its own shift to group 0's, b: with δ its shift
// less b, Σ (x - b) = s1 + k·δ and Σ (x - b)² = s2 + 2·δ·s1 + k·δ². They
// accumulate in the last 2·cols float64s of work, a group's row at a
// time; the variance is then Σ (x - b)²/n less the squared mean of x - b
// (as one shift over every row would give: b is a value of the column,
// so that mean is of the order of the spread).
func momentsCombine[T Float](dst, x []T, rows, cols, block int, work []float64, c0, c1 int) {
	groups, n, w := ceilDiv(rows, block), float64(rows), c1-c0
	a1, a2 := work[2*groups*cols+c0:][:w], work[2*groups*cols+cols+c0:][:w]
	clear(a1)
	clear(a2)
	base := x[c0:c1]
	for g := 0; g < groups; g++ {
		k := float64(min(block, rows-g*block))
		s1, s2, shift := work[2*g*cols+c0:][:w], work[(2*g+1)*cols+c0:][:w], x[g*block*cols+c0:][:w]
		for c := range a1 {
			d := float64(shift[c]) - float64(base[c])
			a1[c] += s1[c] + k*d
			a2[c] += s2[c] + d*(2*s1[c]+k*d)
		}
	}
	for c := range a1 {
		m := a1[c] / n
		dst[c0+c] = T(float64(base[c]) + m)
		dst[cols+c0+c] = T(max(a2[c]/n-m*m, 0))
	}
}

// ChannelSumsWork returns the float64 workspace ChannelSumsOn needs for
// cols channels.
func ChannelSumsWork(cols int) int { return sumsParts * 2 * cols }

// sumsParts is the fixed number of row ranges ChannelSums sums apart (so
// its rounding does not depend on the threads).
const sumsParts = 2

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
	ParallelOn(p, sumsParts, part, j)
	*j = sumsJob[T]{}
	p.calls.momentsMu.Unlock()
	for c := 0; c < cols; c++ {
		s1, s2 := partSums(work, cols, c)
		sg[c], sgx[c] = T(s1), T(s2)
	}
	return sg
}

// partSums adds up column c of the parts' two rows of sums in work (as
// sumsPart leaves them), in part order.
func partSums(work []float64, cols, c int) (s1, s2 float64) {
	for p := 0; p < sumsParts; p++ {
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
	r0, r1 := j.rows*p/sumsParts, j.rows*(p+1)/sumsParts
	c0 := 0 // the channels summed in float64 vectors, sixteen at a time
	if g32, ok := any(j.g).([]float32); ok && r1 > r0 && sumsSIMD(s1, s2, g32[r0*cols:], any(j.x).([]float32)[r0*cols:], r1-r0, cols, cols/16) {
		c0 = cols &^ 15
	}
	for cb := c0; cb < cols; cb += 16 { // row r0 + i into set i mod 4, as the assembly
		var a1, a2 [sumSets][16]float64
		nc := min(16, cols-cb)
		for r := r0; r < r1; r++ {
			gr, xr, b1, b2 := j.g[r*cols+cb:][:nc], j.x[r*cols+cb:][:nc], &a1[(r-r0)%sumSets], &a2[(r-r0)%sumSets]
			for c, v := range gr {
				b1[c] += float64(v)
				b2[c] += float64(v) * float64(xr[c])
			}
		}
		foldSets(s1[cb:cb+nc], &a1)
		foldSets(s2[cb:cb+nc], &a2)
	}
}

func momentsPart32(arg any, part int) { momentsPart[float32](arg, part) }
func momentsPart64(arg any, part int) { momentsPart[float64](arg, part) }

// momentsPart sums the groups of part part into their two rows of work.
func momentsPart[T Float](arg any, part int) {
	j := arg.(*momentsJob[T])
	groups := ceilDiv(j.rows, j.block)
	for g := groups * part / j.parts; g < groups*(part+1)/j.parts; g++ {
		if j.done.has(g) {
			continue
		}
		r0 := g * j.block
		momentsGroup(j.work[2*g*j.cols:(2*g+2)*j.cols], j.x[r0*j.cols:], min(j.block, j.rows-r0), j.cols)
	}
}

// momentsGroup sets s[:cols] and s[cols:2·cols] to Σ d and Σ d·d over rows
// rows of x [rows, cols], d = x - row 0 (the group's shift), in float64,
// row by row in order.
func momentsGroup[T Float](s []float64, x []T, rows, cols int) {
	s1, s2 := s[:cols], s[cols:2*cols]
	clear(s1)
	clear(s2)
	shift := x[:cols]
	c0 := 0 // the channels summed in float64 vectors, sixteen at a time
	if x32, ok := any(x).([]float32); ok && momentsSIMD(s1, s2, x32, x32[:cols], rows, cols, cols/16) {
		c0 = cols &^ 15
	}
	for cb := c0; cb < cols; cb += 16 { // row r into set r mod 4, as the assembly
		var a1, a2 [sumSets][16]float64
		nc := min(16, cols-cb)
		for r := 0; r < rows; r++ {
			row, sh, b1, b2 := x[r*cols+cb:][:nc], shift[cb:][:nc], &a1[r%sumSets], &a2[r%sumSets]
			for c, v := range row {
				d := float64(v) - float64(sh[c])
				b1[c] += d
				b2[c] += d * d
			}
		}
		foldSets(s1[cb:cb+nc], &a1)
		foldSets(s2[cb:cb+nc], &a2)
	}
}

// sumSets is the sets of sums momentsGroup and sumsPart keep apart (as
// moments512 and sums512 do): row r adds into set r mod sumSets, four
// chains of additions instead of one.
const sumSets = 4

// foldSets sets s[c] to the sets' sums of column c added as (0 + 1) + (2
// + 3).
func foldSets(s []float64, a *[sumSets][16]float64) {
	for c := range s {
		s[c] = (a[0][c] + a[1][c]) + (a[2][c] + a[3][c])
	}
}
