package kernels

import "github.com/headroom-ml/headroom/tensor"

// Data-movement kernels copy elements of any type without arithmetic. dst
// must not overlap the inputs.

// Transpose sets dst to x [shape] with its dimensions permuted: dst has
// shape[perm[0]], ..., shape[perm[r-1]] and dst[i_0, ..., i_r-1] = x at index
// j with j[perm[d]] = i_d. It returns dst and panics unless perm is a
// permutation of 0..len(shape)-1 and the lengths match.
func Transpose[T any](dst, x []T, shape, perm []int) []T {
	const fn = "Transpose"
	n := shapeSize(fn, shape)
	checkLen(fn, "x", len(x), n)
	checkLen(fn, "dst", len(dst), n)
	r := len(shape)
	if len(perm) != r {
		panicf("%s: perm %s for shape %s", fn, dims(perm), dims(shape))
	}
	var seen [tensor.MaxRank]bool
	for _, p := range perm {
		if p < 0 || p >= r || seen[p] {
			panicf("%s: perm %s is not a permutation of the %d axes", fn, dims(perm), r)
		}
		seen[p] = true
	}
	if n == 0 {
		return dst
	}
	var xst, out, st [tensor.MaxRank]int
	s := 1
	for d := r - 1; d >= 0; d-- {
		xst[d] = s
		s *= shape[d]
	}
	for d, p := range perm {
		out[d], st[d] = shape[p], xst[p]
	}
	copyStrided(dst, x, out[:r], st[:r])
	return dst
}

// checkRegion validates starts (and ends) against shape and returns the
// region's shape in out and its size.
func checkRegion(fn string, shape, starts, ends []int, out *[tensor.MaxRank]int) int {
	shapeSize(fn, shape)
	if len(starts) != len(shape) || len(ends) != len(shape) {
		panicf("%s: starts %s and ends %s for shape %s", fn, dims(starts), dims(ends), dims(shape))
	}
	n := 1
	for d := range shape {
		if starts[d] < 0 || starts[d] > ends[d] || ends[d] > shape[d] {
			panicf("%s: region %s to %s is outside shape %s", fn, dims(starts), dims(ends), dims(shape))
		}
		out[d] = ends[d] - starts[d]
		n *= out[d]
	}
	return n
}

// regionOffset returns the row-major offset of starts in shape and fills st
// with shape's strides.
func regionOffset(shape, starts []int, st *[tensor.MaxRank]int) int {
	s, off := 1, 0
	for d := len(shape) - 1; d >= 0; d-- {
		st[d] = s
		off += starts[d] * s
		s *= shape[d]
	}
	return off
}

// Slice sets dst to the region [starts, ends) of x [shape] (unit step; dst's
// shape is ends - starts) and returns dst.
func Slice[T any](dst, x []T, shape, starts, ends []int) []T {
	const fn = "Slice"
	var out, st [tensor.MaxRank]int
	n := checkRegion(fn, shape, starts, ends, &out)
	checkLen(fn, "x", len(x), shapeSize(fn, shape))
	checkLen(fn, "dst", len(dst), n)
	if n == 0 {
		return dst
	}
	r := len(shape)
	off := regionOffset(shape, starts, &st)
	copyStrided(dst, x[off:], out[:r], st[:r])
	return dst
}

// Unslice is the gradient of Slice: it zeroes dst [dstShape], writes x into
// the region that starts at starts, and returns dst. starts holds the
// region's start in each dimension, optionally followed by its ends
// (len(starts) == 2*len(dstShape)); with starts alone the region runs to the
// end of every dimension. The region's size must equal len(x).
// UnsliceRegion takes the ends as their own argument.
func Unslice[T any](dst, x []T, dstShape, starts []int) []T {
	r := len(dstShape)
	switch len(starts) {
	case 2 * r:
		return UnsliceRegion(dst, x, dstShape, starts[:r], starts[r:])
	case r:
		return UnsliceRegion(dst, x, dstShape, starts, dstShape)
	}
	panicf("Unslice: %d starts for shape %s (want %d, or %d with the ends)", len(starts), dims(dstShape), r, 2*r)
	return nil
}

// UnsliceRegion zeroes dst [dstShape], writes x (shape ends - starts) into
// the region [starts, ends) and returns dst: the gradient of Slice(_, _,
// dstShape, starts, ends).
func UnsliceRegion[T any](dst, x []T, dstShape, starts, ends []int) []T {
	const fn = "Unslice"
	var out, st [tensor.MaxRank]int
	n := checkRegion(fn, dstShape, starts, ends, &out)
	checkLen(fn, "dst", len(dst), shapeSize(fn, dstShape))
	checkLen(fn, "x", len(x), n)
	clear(dst)
	if n == 0 {
		return dst
	}
	r := len(dstShape)
	off := regionOffset(dstShape, starts, &st)
	w := newWalk(out[:r], 2, [maxOps][]int{nil, st[:r]})
	in, sd := w.inner(), w.stride(1)
	var idx [tensor.MaxRank]int
	var offs [maxOps]int
	for o := 0; o < n; o += in {
		d := dst[off+offs[1]:]
		if sd == 1 {
			copy(d[:in], x[o:o+in])
		} else {
			for i, v := range x[o : o+in] {
				d[i*sd] = v
			}
		}
		w.next(&idx, &offs, 2)
	}
	return dst
}

// Concat joins parts along one axis and returns dst: part i is viewed as
// [outer, inners[i]] and dst as [outer, Σ inners], so dst[o, :] is the
// concatenation of the parts' rows o. parts is built by the caller (its
// slice header is not retained).
func Concat[T any](dst []T, parts [][]T, outer int, inners []int) []T {
	const fn = "Concat"
	total := checkParts(fn, parts, outer, inners)
	checkLen(fn, "dst", len(dst), outer*total)
	o0 := 0
	for o := 0; o < outer; o++ {
		for i, p := range parts {
			w := inners[i]
			copy(dst[o0:o0+w], p[o*w:o*w+w])
			o0 += w
		}
	}
	return dst
}

// Split is the inverse of Concat (and its gradient): it copies row o of x
// [outer, Σ inners] into the parts, part i receiving [outer, inners[i]].
func Split[T any](parts [][]T, x []T, outer int, inners []int) [][]T {
	const fn = "Split"
	total := checkParts(fn, parts, outer, inners)
	checkLen(fn, "x", len(x), outer*total)
	o0 := 0
	for o := 0; o < outer; o++ {
		for i, p := range parts {
			w := inners[i]
			copy(p[o*w:o*w+w], x[o0:o0+w])
			o0 += w
		}
	}
	return parts
}

func checkParts[T any](fn string, parts [][]T, outer int, inners []int) int {
	if outer < 0 {
		panicf("%s: negative outer size %d", fn, outer)
	}
	if len(parts) != len(inners) {
		panicf("%s: %d parts, %d inner sizes", fn, len(parts), len(inners))
	}
	total := 0
	for i, w := range inners {
		if w < 0 || len(parts[i]) != outer*w {
			panicf("%s: part %d has %d elements, want %d×%d", fn, i, len(parts[i]), outer, w)
		}
		total += w
	}
	return total
}

// Gather copies rows of params, viewed as [V, rowSize], into dst [len(indices),
// rowSize]: dst[i, :] = params[indices[i], :]. An index outside [0, V) is bad
// data: its row of dst is zero-filled and bad is the first such i, or -1.
// With rowSize 0 there is nothing to copy and V is unknown, so indices are
// not checked (params and dst must be empty).
func Gather[T any](dst, params []T, indices []int32, rowSize int) (bad int) {
	const fn = "Gather"
	v := checkRowsOf(fn, "params", len(params), rowSize)
	checkLen(fn, "dst", len(dst), len(indices)*rowSize)
	bad = -1
	if rowSize == 0 {
		return bad
	}
	for i, ix := range indices {
		d := dst[i*rowSize : i*rowSize+rowSize]
		if ix < 0 || int(ix) >= v {
			clear(d)
			if bad < 0 {
				bad = i
			}
			continue
		}
		copy(d, params[int(ix)*rowSize:int(ix)*rowSize+rowSize])
	}
	return bad
}

// ScatterAdd adds rows of g [len(indices), rowSize] into dst, viewed as
// [V, rowSize]: dst[indices[i], :] += g[i, :]; repeated indices accumulate.
// It is the gradient of Gather; the caller zeroes dst first. An index
// outside [0, V) is bad data: its row is skipped and bad is the first such i,
// or -1. With rowSize 0 indices are not checked (as Gather).
func ScatterAdd[T Float](dst []T, indices []int32, g []T, rowSize int) (bad int) {
	const fn = "ScatterAdd"
	v := checkRowsOf(fn, "dst", len(dst), rowSize)
	checkLen(fn, "g", len(g), len(indices)*rowSize)
	bad = -1
	if rowSize == 0 {
		return bad
	}
	for i, ix := range indices {
		if ix < 0 || int(ix) >= v {
			if bad < 0 {
				bad = i
			}
			continue
		}
		d := dst[int(ix)*rowSize : int(ix)*rowSize+rowSize]
		for c, x := range g[i*rowSize : i*rowSize+rowSize] {
			d[c] += x
		}
	}
	return bad
}

// checkRowsOf returns the number of rows of a [V, rowSize] view of n elements.
func checkRowsOf(fn, what string, n, rowSize int) int {
	if rowSize < 0 {
		panicf("%s: negative row size %d", fn, rowSize)
	}
	if rowSize == 0 {
		checkLen(fn, what, n, 0)
		return 0
	}
	if n%rowSize != 0 {
		panicf("%s: len(%s) = %d is not a multiple of the row size %d", fn, what, n, rowSize)
	}
	return n / rowSize
}

// OneHot sets dst [len(indices), depth] to the one-hot encoding of indices
// and returns dst: dst[i, indices[i]] = 1, 0 elsewhere. An index outside
// [0, depth) gives an all-zero row, as tf.one_hot does.
func OneHot[T Float](dst []T, indices []int32, depth int) []T {
	const fn = "OneHot"
	if depth < 0 {
		panicf("%s: negative depth %d", fn, depth)
	}
	checkLen(fn, "dst", len(dst), len(indices)*depth)
	clear(dst)
	for i, ix := range indices {
		if ix >= 0 && int(ix) < depth {
			dst[i*depth+int(ix)] = 1
		}
	}
	return dst
}
