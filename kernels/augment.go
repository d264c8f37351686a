package kernels

import "math"

// The kernels of the augmentation ops: uniform draws and the projective
// image transform of Keras' random preprocessing layers.

// RandomUniform fills dst with values uniform in [0, 1): element i is
// (the top 24 bits of draw i)·2^-24, exact in float32 and float64, draw i
// a pure function of (seed, step, i) from the generator DropoutMask uses.
// It returns dst.
func RandomUniform[T Float](dst []T, seed uint64, step int64) []T {
	base := mix64(seed ^ mix64(uint64(step)+0x9e3779b97f4a7c15))
	for i := range dst {
		dst[i] = T(float64(mix64(base+uint64(i)*0x9e3779b97f4a7c15)>>40) * (1.0 / (1 << 24)))
	}
	return dst
}

// The fill modes of ImageTransformGeom.Fill, as graph.FillMode.
const (
	FillReflect = iota
	FillWrap
	FillConstant
	FillNearest
)

// ImageTransformGeom is an image transform over N images of H×W pixels
// and C channels: Bilinear (else nearest) interpolation, the fill mode and
// the value constant filling reads. Transforms holds the number of
// transform rows: N, or 1 for one transform of every image.
type ImageTransformGeom struct {
	N, H, W, C, Transforms int
	Bilinear               bool
	Fill                   int
	FillValue              float64
}

func (g ImageTransformGeom) check(fn string, lenX, lenDst, lenT int) {
	if g.N < 0 || g.H <= 0 || g.W <= 0 || g.C < 0 || (g.Transforms != g.N && g.Transforms != 1) || g.Fill < FillReflect || g.Fill > FillNearest {
		panicf("%s: invalid geometry %+v", fn, g)
	}
	n := g.N * g.H * g.W * g.C
	checkLen(fn, "x", lenX, n)
	checkLen(fn, "dst", lenDst, n)
	checkLen(fn, "transforms", lenT, 8*g.Transforms)
}

// mapCoord maps coordinate c of an axis of n pixels into [0, n-1] by fill
// mode (constant filling leaves it), as TensorFlow's MapCoordinate, whose
// wrap subtracts n·⌊c/(n-1)⌋ above the image (so a point more than n-1
// beyond it is clamped, not wrapped, there as here).
func mapCoord(c float64, n, fill int) float64 {
	size := float64(n)
	switch fill {
	case FillReflect:
		if n <= 1 {
			return 0
		}
		sz2 := 2 * size
		if c < 0 {
			c = sz2*math.Trunc(-c/sz2) + c
			if c < -size {
				c += sz2
			} else {
				c = -c - 1
			}
		} else if c > size-1 {
			c -= sz2 * math.Trunc(c/sz2)
			if c >= size {
				c = sz2 - c - 1
			}
		}
	case FillWrap:
		if n <= 1 {
			return 0
		}
		sz := size - 1
		if c < 0 {
			c += size * (math.Trunc(-c/sz) + 1)
		} else if c > size-1 {
			c -= size * math.Trunc(c/sz)
		}
	case FillConstant:
		return c
	}
	return min(max(c, 0), size-1) // reflect, wrap and nearest end clamped
}

// tap is one input pixel an output pixel reads, and its weight; a pixel
// outside the image reads the fill value.
type tap struct {
	y, x int
	w    float64
}

// taps returns the input pixels output pixel (oy, ox) of image n reads
// with transform t (8 values), at most four; fill reports that the whole
// point is the fill value (constant filling of a point outside the image,
// or a transform that sends it to infinity).
func (g ImageTransformGeom) taps(t []float64, oy, ox int, out *[4]tap) (n int, fill bool) {
	x, y := float64(ox), float64(oy)
	k := t[6]*x + t[7]*y + 1
	if k == 0 {
		return 0, true
	}
	ix := mapCoord((t[0]*x+t[1]*y+t[2])/k, g.W, g.Fill)
	iy := mapCoord((t[3]*x+t[4]*y+t[5])/k, g.H, g.Fill)
	if ix < 0 || ix > float64(g.W-1) || iy < 0 || iy > float64(g.H-1) {
		return 0, true
	}
	if !g.Bilinear { // std::round, as math.Round: half away from zero
		out[0] = tap{y: int(math.Round(iy)), x: int(math.Round(ix)), w: 1}
		return 1, false
	}
	y0, x0 := math.Floor(iy), math.Floor(ix)
	wy, wx := iy-y0, ix-x0
	out[0] = tap{int(y0), int(x0), (1 - wy) * (1 - wx)}
	out[1] = tap{int(y0), int(x0) + 1, (1 - wy) * wx}
	out[2] = tap{int(y0) + 1, int(x0), wy * (1 - wx)}
	out[3] = tap{int(y0) + 1, int(x0) + 1, wy * wx}
	return 4, false
}

// transformRow returns image n's transform as float64s.
func transformRow[T Float](t []T, n int, row *[8]float64) []float64 {
	off := 0
	if len(t) > 8 {
		off = 8 * n
	}
	for i := range row {
		row[i] = float64(t[off+i])
	}
	return row[:]
}

// ImageTransform sets dst [N, H, W, C] to the images x [N, H, W, C]
// resampled at the points the transforms [Transforms, 8] map each output
// pixel (x, y) to: ((a0·x + a1·y + a2)/k, (b0·x + b1·y + b2)/k), k = c0·x
// + c1·y + 1, as TensorFlow's ImageProjectiveTransformV3
// (tensorflow/core/kernels/image/image_ops.h), in float64: the point is
// mapped into the image by the fill mode (constant filling reads the fill
// value for a point outside), then read by nearest (rounding half away
// from zero) or bilinear interpolation, a neighbour outside the image
// reading the fill value. It returns dst; dst must not overlap x.
func ImageTransform[T Float](dst, x, t []T, g ImageTransformGeom) []T {
	g.check("ImageTransform", len(x), len(dst), len(t))
	var row [8]float64
	var ts [4]tap
	for n := 0; n < g.N; n++ {
		tr := transformRow(t, n, &row)
		img := x[n*g.H*g.W*g.C : (n+1)*g.H*g.W*g.C]
		for oy := 0; oy < g.H; oy++ {
			for ox := 0; ox < g.W; ox++ {
				out := dst[((n*g.H+oy)*g.W+ox)*g.C:][:g.C]
				k, fill := g.taps(tr, oy, ox, &ts)
				for c := range out {
					if fill {
						out[c] = T(g.FillValue)
						continue
					}
					v := 0.0
					for _, p := range ts[:k] {
						if p.y < 0 || p.y >= g.H || p.x < 0 || p.x >= g.W {
							v += p.w * g.FillValue
						} else {
							v += p.w * float64(img[(p.y*g.W+p.x)*g.C+c])
						}
					}
					out[c] = T(v)
				}
			}
		}
	}
	return dst
}

// ImageTransformGrad sets dx [N, H, W, C] to the gradient of
// Σ dy·ImageTransform(x, t) with respect to x: each output cell adds dy
// times each interpolation weight into the input cell it read (the fill
// value depends on no cell). It returns dx, which must not overlap dy.
func ImageTransformGrad[T Float](dx, dy, t []T, g ImageTransformGeom) []T {
	g.check("ImageTransformGrad", len(dy), len(dx), len(t))
	clear(dx)
	var row [8]float64
	var ts [4]tap
	for n := 0; n < g.N; n++ {
		tr := transformRow(t, n, &row)
		img := dx[n*g.H*g.W*g.C : (n+1)*g.H*g.W*g.C]
		for oy := 0; oy < g.H; oy++ {
			for ox := 0; ox < g.W; ox++ {
				k, fill := g.taps(tr, oy, ox, &ts)
				if fill {
					continue
				}
				src := dy[((n*g.H+oy)*g.W+ox)*g.C:][:g.C]
				for _, p := range ts[:k] {
					if p.y < 0 || p.y >= g.H || p.x < 0 || p.x >= g.W || p.w == 0 {
						continue
					}
					cell := img[(p.y*g.W+p.x)*g.C:][:g.C]
					for c, v := range src {
						cell[c] += T(p.w * float64(v))
					}
				}
			}
		}
	}
	return dx
}
