package cpu

import (
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/kernels"
	"github.com/headroom-ml/headroom/tensor"
)

// Cast (graph/elementwise.go) on the host: between any two dtypes, its
// loop chosen by both when bound.
func init() {
	register(graph.OpCast, kernel{bind: every(bindCast)})
}

func bindCast(b *Bound) func() error {
	if part := halfCastPart(b); part != nil {
		return func() error {
			b.runHalfCast(part)
			return nil
		}
	}
	src, dst := b.in[0], b.out
	switch b.DType {
	case tensor.Float32:
		return castTo(b, tensor.As[float32](dst), src)
	case tensor.Float64:
		return castTo(b, tensor.As[float64](dst), src)
	case tensor.Int32:
		return castTo(b, tensor.As[int32](dst), src)
	case tensor.Int64:
		return castTo(b, tensor.As[int64](dst), src)
	case tensor.Uint8:
		return castTo(b, dst, src)
	case tensor.Bool:
		return func() error { castBool(dst, src, b.InDType); return nil }
	case tensor.Float16, tensor.BFloat16:
		return func() error { castHalf(dst, src, b.DType, b.InDType); return nil }
	}
	return nil
}

// castBool writes nonzero as true, as NumPy's astype(bool).
func castBool(dst, src []byte, from tensor.DType) {
	for i := range dst {
		dst[i] = 0
	}
	sz := from.Size()
	for i := range dst {
		for _, c := range src[i*sz : (i+1)*sz] {
			if c != 0 {
				dst[i] = 1
				break
			}
		}
	}
	if from.IsFloat() { // -0.0 is false
		t, _ := tensor.FromBytes(from, tensor.Shape{len(dst)}, src)
		for i := range dst {
			if t.Float64At(i) == 0 {
				dst[i] = 0
			}
		}
	}
}

// castHalf casts to a 16-bit float through float32 (from float32 itself:
// halfCastPart): every source converts to float32 exactly or by one rounding.
func castHalf(dst, src []byte, to, from tensor.DType) {
	n := len(dst) / 2
	srcT, _ := tensor.FromBytes(from, tensor.Shape{n}, src)
	if to == tensor.Float16 {
		d := tensor.As16[tensor.F16](dst)
		for i := range d {
			d[i] = tensor.ToFloat16(float32(srcT.Float64At(i)))
		}
		return
	}
	d := tensor.As16[tensor.BF16](dst)
	for i := range d {
		d[i] = tensor.ToBFloat16(float32(srcT.Float64At(i)))
	}
}

// halfCastMin is the element count from which a cast between float32 and
// a 16-bit float type is split over the kernels' threads.
const halfCastMin = 1 << 15

// halfCastPart returns the function that converts a part of b when b
// casts between float32 and bfloat16 or float16 (the mixed-precision
// policies' casts of saved activations, large and on the step's path,
// which run in parts on the kernels' threads), else nil.
func halfCastPart(b *Bound) func(arg any, p int) {
	switch {
	case b.InDType == tensor.Float32 && b.DType == tensor.BFloat16:
		return toBF16Part
	case b.InDType == tensor.Float32 && b.DType == tensor.Float16:
		return toF16Part
	case b.DType == tensor.Float32 && b.InDType == tensor.BFloat16:
		return fromBF16Part
	case b.DType == tensor.Float32 && b.InDType == tensor.Float16:
		return fromF16Part
	}
	return nil
}

// runHalfCast runs a cast between float32 and a 16-bit float in parts,
// split over the kernels' threads when large.
func (b *Bound) runHalfCast(part func(arg any, p int)) {
	n := len(b.out) / b.DType.Size()
	b.splits = 1
	if n >= halfCastMin {
		b.splits = b.pool.Threads()
	}
	kernels.ParallelOn(b.pool, b.splits, part, b)
}

// The parts of the half casts: part p of b.splits of the elements.
func fromBF16Part(arg any, p int) {
	b := arg.(*Bound)
	dst := tensor.As[float32](b.out)
	lo, hi := p*len(dst)/b.splits, (p+1)*len(dst)/b.splits
	kernels.BF16ToFloat32(dst[lo:hi], tensor.As16[tensor.BF16](b.in[0])[lo:hi])
}

func fromF16Part(arg any, p int) {
	b := arg.(*Bound)
	dst := tensor.As[float32](b.out)
	lo, hi := p*len(dst)/b.splits, (p+1)*len(dst)/b.splits
	kernels.F16ToFloat32(dst[lo:hi], tensor.As16[tensor.F16](b.in[0])[lo:hi])
}

func toBF16Part(arg any, p int) {
	b := arg.(*Bound)
	src := tensor.As[float32](b.in[0])
	lo, hi := p*len(src)/b.splits, (p+1)*len(src)/b.splits
	kernels.Float32ToBF16(tensor.As16[tensor.BF16](b.out)[lo:hi], src[lo:hi])
}

func toF16Part(arg any, p int) {
	b := arg.(*Bound)
	src := tensor.As[float32](b.in[0])
	lo, hi := p*len(src)/b.splits, (p+1)*len(src)/b.splits
	kernels.Float32ToF16(tensor.As16[tensor.F16](b.out)[lo:hi], src[lo:hi])
}

// castTo returns the cast of src, by its dtype, into dst.
func castTo[D kernels.Number](b *Bound, dst []D, src []byte) func() error {
	switch b.InDType {
	case tensor.Float32:
		return convert(dst, tensor.As[float32](src))
	case tensor.Float64:
		return convert(dst, tensor.As[float64](src))
	case tensor.Int32:
		return convert(dst, tensor.As[int32](src))
	case tensor.Int64:
		return convert(dst, tensor.As[int64](src))
	case tensor.Uint8, tensor.Bool:
		return convert(dst, src)
	case tensor.Float16: // (to float32: halfCastPart)
		s := tensor.As16[tensor.F16](src)
		return func() error {
			for i := range dst {
				dst[i] = D(s[i].Float32())
			}
			return nil
		}
	case tensor.BFloat16: // (to float32: halfCastPart)
		s := tensor.As16[tensor.BF16](src)
		return func() error {
			for i := range dst {
				dst[i] = D(s[i].Float32())
			}
			return nil
		}
	}
	return nil
}

func convert[D, S kernels.Number](dst []D, src []S) func() error {
	return func() error {
		kernels.Convert(dst, src)
		return nil
	}
}
