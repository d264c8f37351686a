package kernels

import "github.com/headroom-ml/headroom/tensor"

// AddRegion adds x (of shape ends - starts) into the region [starts, ends)
// of dst [dstShape] and returns dst: dst + Unslice(x), in place. Autodiff
// sums the gradients of the slices of one value with it (graph.UnsliceAdd).
// It panics if the region is outside dstShape or a length does not match.
func AddRegion[T Float](dst, x []T, dstShape, starts, ends []int) []T {
	const fn = "AddRegion"
	var out, st [tensor.MaxRank]int
	n := checkRegion(fn, dstShape, starts, ends, &out)
	checkLen(fn, "dst", len(dst), shapeSize(fn, dstShape))
	checkLen(fn, "x", len(x), n)
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
			binaryVV(Add, d[:in], d[:in], x[o:o+in])
		} else {
			for i, v := range x[o : o+in] {
				d[i*sd] += v
			}
		}
		w.next(&idx, &offs, 2)
	}
	return dst
}
