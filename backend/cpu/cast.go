package cpu

import (
	"unsafe"

	"github.com/headroom-ml/headroom/kernels"
	"github.com/headroom-ml/headroom/tensor"
)

// asAny views b as elements of T (any fixed-size type) without copying.
func asAny[T any](b []byte) []T {
	var z T
	n := int(unsafe.Sizeof(z))
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/n)
}

// cast converts between any two dtypes.
func (b *Bound) cast() error {
	if b.halfCast() {
		return nil
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
		// nonzero is true, as NumPy's astype(bool)
		for i := range dst {
			dst[i] = 0
		}
		sz := b.InDType.Size()
		for i := range dst {
			for _, c := range src[i*sz : (i+1)*sz] {
				if c != 0 {
					dst[i] = 1
					break
				}
			}
		}
		if b.InDType.IsFloat() { // -0.0 is false
			t, _ := tensor.FromBytes(b.InDType, tensor.Shape{len(dst)}, src)
			for i := range dst {
				if t.Float64At(i) == 0 {
					dst[i] = 0
				}
			}
		}
		return nil
	case tensor.Float16, tensor.BFloat16:
		// through float32 (from float32 itself: halfCast): every source
		// converts to float32 exactly or by one rounding
		n := len(dst) / 2
		srcT, _ := tensor.FromBytes(b.InDType, tensor.Shape{n}, src)
		if b.DType == tensor.Float16 {
			d := tensor.As16[tensor.F16](dst)
			for i := range d {
				d[i] = tensor.ToFloat16(float32(srcT.Float64At(i)))
			}
			return nil
		}
		d := tensor.As16[tensor.BF16](dst)
		for i := range d {
			d[i] = tensor.ToBFloat16(float32(srcT.Float64At(i)))
		}
		return nil
	}
	return b.fail("cannot cast %s to %s", b.InDType, b.DType)
}

// halfCastMin is the element count from which a cast between float32 and
// a 16-bit float type is split over the kernels' threads.
const halfCastMin = 1 << 15

// halfCast runs a cast between float32 and bfloat16 or float16 (the
// mixed-precision policies' casts of saved activations, large and on the
// step's path) in parts on the kernels' threads, and reports whether b was
// one; other casts are left to cast.
func (b *Bound) halfCast() bool {
	var n int
	switch {
	case b.InDType == tensor.Float32 && (b.DType == tensor.BFloat16 || b.DType == tensor.Float16):
		n = len(b.out) / 2
	case b.DType == tensor.Float32 && (b.InDType == tensor.BFloat16 || b.InDType == tensor.Float16):
		n = len(b.out) / 4
	default:
		return false
	}
	b.castParts = 1
	if n >= halfCastMin {
		b.castParts = kernels.Threads()
	}
	kernels.Parallel(b.castParts, halfCastPart, b)
	return true
}

// halfCastPart converts part p of b.castParts of a halfCast.
func halfCastPart(arg any, p int) {
	b := arg.(*Bound)
	if b.DType == tensor.Float32 {
		dst := tensor.As[float32](b.out)
		lo, hi := p*len(dst)/b.castParts, (p+1)*len(dst)/b.castParts
		if b.InDType == tensor.BFloat16 {
			kernels.BF16ToFloat32(dst[lo:hi], tensor.As16[tensor.BF16](b.in[0])[lo:hi])
		} else {
			kernels.F16ToFloat32(dst[lo:hi], tensor.As16[tensor.F16](b.in[0])[lo:hi])
		}
		return
	}
	src := tensor.As[float32](b.in[0])
	lo, hi := p*len(src)/b.castParts, (p+1)*len(src)/b.castParts
	if b.DType == tensor.BFloat16 {
		kernels.Float32ToBF16(tensor.As16[tensor.BF16](b.out)[lo:hi], src[lo:hi])
	} else {
		kernels.Float32ToF16(tensor.As16[tensor.F16](b.out)[lo:hi], src[lo:hi])
	}
}

func castTo[D kernels.Number](b *Bound, dst []D, src []byte) error {
	switch b.InDType {
	case tensor.Float32:
		kernels.Convert(dst, tensor.As[float32](src))
	case tensor.Float64:
		kernels.Convert(dst, tensor.As[float64](src))
	case tensor.Int32:
		kernels.Convert(dst, tensor.As[int32](src))
	case tensor.Int64:
		kernels.Convert(dst, tensor.As[int64](src))
	case tensor.Uint8, tensor.Bool:
		kernels.Convert(dst, src)
	case tensor.Float16: // (to float32: halfCast)
		s := tensor.As16[tensor.F16](src)
		for i := range dst {
			dst[i] = D(s[i].Float32())
		}
	case tensor.BFloat16: // (to float32: halfCast)
		s := tensor.As16[tensor.BF16](src)
		for i := range dst {
			dst[i] = D(s[i].Float32())
		}
	default:
		return b.fail("cannot cast %s to %s", b.InDType, b.DType)
	}
	return nil
}

// compare runs a comparison on the input dtype.
func (b *Bound) compare() error {
	op := compareOp(b.Op)
	switch b.InDType {
	case tensor.Float32:
		kernels.Compare(op, b.out, tensor.As[float32](b.in[0]), tensor.As[float32](b.in[1]), b.Shape, b.AStrides, b.BStrides)
	case tensor.Float64:
		kernels.Compare(op, b.out, tensor.As[float64](b.in[0]), tensor.As[float64](b.in[1]), b.Shape, b.AStrides, b.BStrides)
	case tensor.Int32:
		kernels.Compare(op, b.out, tensor.As[int32](b.in[0]), tensor.As[int32](b.in[1]), b.Shape, b.AStrides, b.BStrides)
	case tensor.Int64:
		kernels.Compare(op, b.out, tensor.As[int64](b.in[0]), tensor.As[int64](b.in[1]), b.Shape, b.AStrides, b.BStrides)
	case tensor.Uint8:
		kernels.Compare(op, b.out, b.in[0], b.in[1], b.Shape, b.AStrides, b.BStrides)
	default:
		return b.fail("cannot compare %s values", b.InDType)
	}
	return nil
}
