package ptx

import (
	"fmt"
	"math"

	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

// The reductions (graph/reduce.go): sums in float64 rounded once (the
// host sums rows in float64 and some columns in float32: the two agree
// to float32 rounding), a mean as the float32 sum times the float32
// 1/count (the host's order), and the maximum (NaN wins, -Inf for an
// empty reduction).
func init() {
	for _, op := range []graph.Op{graph.OpReduceSum, graph.OpReduceMean, graph.OpReduceMax} {
		register(op, renderer{dtypes: only32, render: renderReduce})
	}
}

// reduceShape splits a reduction of x [XShape] into the kept axes (the
// output's, in order) and the reduced ones, with x's row-major strides.
type reduceShape struct {
	keptDims, keptStrides []int // sizes and x strides of the kept axes
	redDims, redStrides   []int // of the reduced axes
	outN, redN            int
}

func splitReduce(xShape, dstStrides []int) (reduceShape, error) {
	s := reduceShape{outN: 1, redN: 1}
	stride := 1
	xs := make([]int, len(xShape))
	for d := len(xShape) - 1; d >= 0; d-- {
		xs[d] = stride
		stride *= xShape[d]
	}
	want := 1
	for d := len(xShape) - 1; d >= 0; d-- {
		switch {
		case xShape[d] == 1:
		case dstStrides[d] == 0:
			s.redDims = append([]int{xShape[d]}, s.redDims...)
			s.redStrides = append([]int{xs[d]}, s.redStrides...)
			s.redN *= xShape[d]
		default:
			if dstStrides[d] != want {
				return s, fmt.Errorf("the output's strides %v are not row-major over the kept axes of %v", dstStrides, xShape)
			}
			want *= xShape[d]
			s.keptDims = append([]int{xShape[d]}, s.keptDims...)
			s.keptStrides = append([]int{xs[d]}, s.keptStrides...)
			s.outN *= xShape[d]
		}
	}
	return s, nil
}

// xOffset returns Σ index_d·stride_d for the linear index i over dims.
func (b *builder) xOffset(i string, dims, strides []int) string {
	off := b.r32()
	b.ins("mov.u32", off, "0")
	q := i
	for d := len(dims) - 1; d >= 0; d-- {
		idx := q
		if d > 0 {
			idx = b.remu(q, dims[d])
			q = b.divu(q, dims[d])
		}
		off = b.madu(idx, strides[d], off)
	}
	return off
}

// renderReduce renders a reduction: one thread per output element when
// there are many outputs or few elements to each, else one block per
// output with the reduced elements strided over its threads.
func renderReduce(r *req) error {
	it := r.it
	g := it.Reduce
	s, err := splitReduce(g.XShape, g.DstStrides)
	if err != nil {
		return err
	}
	isMax := it.Op == graph.OpReduceMax
	var b *builder
	var p []string
	var v string
	if s.outN >= 2*Block || s.redN <= 32 {
		var o string
		b, p, o = r.elementwiseKernel("reduce", 2, s.outN)
		base := b.xOffset(o, s.keptDims, s.keptStrides)
		v = b.reduceSerial(p[1], base, s, isMax)
		finishReduce(b, it.Op, g.Scale, p[0], o, v)
		r.launch(b.kernel(), blocks(s.outN), out(), in(0))
		return nil
	}
	var o, tid string
	b, p, o, tid = r.rowKernel("reduce_rows", 2)
	base := b.xOffset(o, s.keptDims, s.keptStrides)
	var acc string
	if isMax {
		acc = b.accF32(float32(math.Inf(-1)))
	} else {
		acc = b.accF64(0)
	}
	b.strided(tid, s.redN, func(j string) {
		x := b.load(tensor.Float32, b.offset(p[1], b.addu(base, b.xOffset(j, s.redDims, s.redStrides)), 4))
		b.accumulate(acc, x, isMax)
	})
	if isMax {
		v = b.blockReduce(acc, tid, maxF32)
	} else {
		v = b.blockReduce(acc, tid, sumF64)
	}
	first := b.pred()
	b.ins("setp.eq.u32", first, tid, "0")
	end := b.newLabel()
	b.bra(first, true, end)
	finishReduce(b, it.Op, g.Scale, p[0], o, v)
	b.label(end)
	r.launch(b.kernel(), s.outN, out(), in(0))
	return nil
}

// accumulate adds the float32 x into the float64 acc (or takes the max
// into the float32 acc), in place.
func (b *builder) accumulate(acc, x string, isMax bool) {
	if isMax {
		m := b.maxMin(true, acc, x)
		b.ins("mov.f32", acc, m)
		return
	}
	b.ins("add.rn.f64", acc, acc, b.widen(x))
}

// reduceSerial loops over the reduced elements of one output (x offset
// base) in one thread.
func (b *builder) reduceSerial(x, base string, s reduceShape, isMax bool) string {
	var acc string
	if isMax {
		acc = b.accF32(float32(math.Inf(-1)))
	} else {
		acc = b.accF64(0)
	}
	b.counted(s.redN, func(j string) {
		v := b.load(tensor.Float32, b.offset(x, b.addu(base, b.xOffset(j, s.redDims, s.redStrides)), 4))
		b.accumulate(acc, v, isMax)
	})
	return acc
}

// finishReduce stores output element o: the max as it is, the sum
// rounded, the mean as the rounded sum times the float32 scale.
func finishReduce(b *builder, op graph.Op, scale float64, dst, o, v string) {
	if op != graph.OpReduceMax {
		v = b.narrow(v)
		if op == graph.OpReduceMean {
			v = b.mulF(v, f32i(float32(scale)))
		}
	}
	b.store(tensor.Float32, b.offset(dst, o, 4), v)
}
