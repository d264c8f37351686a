package graph

import "github.com/headroom-ml/headroom/tensor"

// MatMul returns a·b for matrices: a [m, k] · b [k, n] -> [m, n]. Leading
// (batch) dimensions are allowed when a and b have the same ones, or when b is
// a matrix shared by every batch element: a [..., m, k] · b [k, n].
func MatMul(a, b *Node) *Node { return MatMulT(a, b, false, false) }

// MatMulT is MatMul with either operand transposed in its last two
// dimensions, without copying it: op(a) [m, k] · op(b) [k, n].
func MatMulT(a, b *Node, transA, transB bool) *Node {
	g := a.g
	if a.dtype != b.dtype {
		g.throw(OpMatMul, "dtype mismatch: %s%v vs %s%v", a.dtype, a.shape, b.dtype, b.shape)
	}
	if a.dtype != tensor.Float32 && a.dtype != tensor.Float64 {
		g.throw(OpMatMul, "needs float32 or float64 operands, got %s", a.dtype)
	}
	ra, rb := a.shape.Rank(), b.shape.Rank()
	if ra < 2 || rb < 2 {
		g.throw(OpMatMul, "operands must have rank >= 2, got %v and %v", a.shape, b.shape)
	}
	m, ka := a.shape[ra-2], a.shape[ra-1]
	if transA {
		m, ka = ka, m
	}
	kb, n := b.shape[rb-2], b.shape[rb-1]
	if transB {
		kb, n = n, kb
	}
	if ka != kb {
		g.throw(OpMatMul, "inner dimensions differ: %v%s · %v%s (%d vs %d)", a.shape, tmark(transA), b.shape, tmark(transB), ka, kb)
	}
	batch := a.shape[:ra-2]
	if rb > 2 && !tensor.Shape(b.shape[:rb-2]).Equal(batch) {
		g.throw(OpMatMul, "batch dimensions differ: %v vs %v", a.shape, b.shape)
	}
	out := append(tensor.Shape{}, batch...)
	out = append(out, m, n)
	return g.add(OpMatMul, a.dtype, out, Attr{TransA: transA, TransB: transB}, a, b)
}

func tmark(t bool) string {
	if t {
		return "ᵀ"
	}
	return ""
}
