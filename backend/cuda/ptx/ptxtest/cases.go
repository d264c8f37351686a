package ptxtest

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

const (
	f32  = tensor.Float32
	i32  = tensor.Int32
	bf16 = tensor.BFloat16
	f16  = tensor.Float16
	bl   = tensor.Bool
)

func sh(d ...int) tensor.Shape { return tensor.Shape(d) }

// in32 is a float32 operand of shape s.
func in32(s ...int) operand { return operand{dt: f32, shape: sh(s...)} }

// ints is an int32 operand of shape s with values in [lo, hi).
func ints(lo, hi int, s ...int) operand {
	return operand{dt: i32, shape: sh(s...), fill: func(r *rand.Rand, _ int) float64 { return float64(lo + r.IntN(hi-lo)) }}
}

// bools is a bool operand of shape s.
func bools(s ...int) operand {
	return operand{dt: bl, shape: sh(s...), fill: func(r *rand.Rand, _ int) float64 { return float64(r.IntN(2)) }}
}

// special is a float32 operand with NaN, ±Inf, ±0 and extremes among
// normal values.
func special(s ...int) operand {
	vals := []float64{math.NaN(), math.Inf(1), math.Inf(-1), 0, math.Copysign(0, -1), 1e-40, -3e38, 88.7, -104, 1e-7}
	return operand{dt: f32, shape: sh(s...), fill: func(r *rand.Rand, i int) float64 {
		if i%7 == 3 {
			return vals[r.IntN(len(vals))]
		}
		return r.NormFloat64() * 4
	}}
}

// positive is a float32 operand of values in (0, 4).
func positive(s ...int) operand {
	return operand{dt: f32, shape: sh(s...), fill: func(r *rand.Rand, _ int) float64 { return r.Float64()*4 + 1e-3 }}
}

func ew(op graph.Op, shape tensor.Shape) compile.Instr {
	return compile.Instr{Op: op, DType: f32, InDType: f32, Shape: shape}
}

func binop(op graph.Op, a, b, out tensor.Shape) compile.Instr {
	it := ew(op, out)
	g := &compile.BroadcastGeom{Path: compile.PathBroadcast, AStrides: tensor.BroadcastStrides(a, out), BStrides: tensor.BroadcastStrides(b, out)}
	switch {
	case a.Equal(out) && b.Equal(out):
		g.Path = compile.PathSame
	case a.Size() == out.Size() && b.Size() == 1:
		g.Path = compile.PathScalarRight
	case a.Size() == 1 && b.Size() == out.Size():
		g.Path = compile.PathScalarLeft
	}
	it.Broadcast = g
	return it
}

// elementwiseCases: every elementwise op, on odd sizes and special values.
func elementwiseCases() []Case {
	var cs []Case
	for _, op := range []graph.Op{graph.OpNeg, graph.OpExp, graph.OpLog, graph.OpSqrt, graph.OpRelu, graph.OpSigmoid, graph.OpTanh,
		graph.OpErf, graph.OpAbs, graph.OpGelu} {
		cs = append(cs, Case{Name: op.String() + "/1000", it: ew(op, sh(1000)), ins: []operand{in32(1000)}},
			Case{Name: op.String() + "/special", it: ew(op, sh(3, 257)), ins: []operand{special(3, 257)}})
	}
	cs = append(cs, Case{Name: "log/positive", it: ew(graph.OpLog, sh(999)), ins: []operand{positive(999)}})
	for _, op := range []graph.Op{graph.OpReluGrad, graph.OpSigmoidGrad, graph.OpTanhGrad, graph.OpGeluGrad} {
		cs = append(cs, Case{Name: op.String(), it: ew(op, sh(5, 203)), ins: []operand{in32(5, 203), in32(5, 203)}})
	}
	for _, op := range []graph.Op{graph.OpAdd, graph.OpSub, graph.OpMul, graph.OpDiv, graph.OpMaximum, graph.OpMinimum} {
		out := sh(3, 5, 7)
		cs = append(cs,
			Case{Name: op.String() + "/same", it: binop(op, sh(1001), sh(1001), sh(1001)), ins: []operand{special(1001), special(1001)}},
			Case{Name: op.String() + "/scalar-right", it: binop(op, sh(300), sh(1), sh(300)), ins: []operand{in32(300), in32(1)}},
			Case{Name: op.String() + "/scalar-left", it: binop(op, sh(1), sh(300), sh(300)), ins: []operand{in32(1), in32(300)}},
			Case{Name: op.String() + "/broadcast", it: binop(op, sh(3, 1, 7), sh(5, 1), out), ins: []operand{in32(3, 1, 7), in32(5, 1)}})
	}
	for _, op := range []graph.Op{graph.OpEqual, graph.OpNotEqual, graph.OpLess, graph.OpLessEqual, graph.OpGreater, graph.OpGreaterEqual} {
		it := binop(op, sh(4, 9), sh(9), sh(4, 9))
		it.DType, it.InDType, it.Broadcast.Path = bl, f32, compile.PathBroadcast
		cs = append(cs, Case{Name: op.String() + "/float32", it: it, ins: []operand{special(4, 9), special(9)}})
		iti := it
		iti.InDType = i32
		cs = append(cs, Case{Name: op.String() + "/int32", it: iti, ins: []operand{ints(-3, 3, 4, 9), ints(-3, 3, 9)}})
	}
	where := compile.Instr{Op: graph.OpWhere, DType: f32, InDType: f32, Shape: sh(6, 37),
		Broadcast: &compile.BroadcastGeom{CStrides: tensor.BroadcastStrides(sh(6, 1), sh(6, 37)),
			AStrides: tensor.BroadcastStrides(sh(6, 37), sh(6, 37)), BStrides: tensor.BroadcastStrides(sh(37), sh(6, 37))}}
	cs = append(cs, Case{Name: "where", it: where, ins: []operand{bools(6, 1), in32(6, 37), in32(37)}})
	for _, c := range [][2]tensor.DType{{bf16, f32}, {f32, bf16}, {f16, f32}, {f32, f16}, {f32, i32}, {i32, f32}, {f32, bl}, {bl, f32}, {f32, tensor.Uint8}} {
		to, from := c[0], c[1]
		x := operand{dt: from, shape: sh(777)}
		if from == f32 {
			x = special(777)
			if to == i32 {
				x = in32(777)
			}
		} else if from == bl {
			x = bools(777)
		} else if from == i32 || from == tensor.Uint8 {
			x = ints(0, 100, 777)
			x.dt = from
		}
		cs = append(cs, Case{Name: fmt.Sprintf("cast/%s-to-%s", from, to), it: compile.Instr{Op: graph.OpCast, DType: to, InDType: from, Shape: sh(777)},
			ins: []operand{x}})
	}
	return cs
}

// fusedCases: chains as compile makes them (bias and relu, an optimizer's
// update with scalars, a guarded assign).
func fusedCases() []Case {
	biasRelu := &compile.Fused{Regs: 1, Leaves: []compile.FusedLeaf{{Kind: compile.LeafFull}, {Kind: compile.LeafPeriodic, Period: 37}},
		Steps: []compile.FusedStep{{Op: graph.OpAdd, Dst: 0, A: -1, B: -2}, {Op: graph.OpRelu, Dst: -1, A: 0}}}
	// p - lr·m/(sqrt(v)+eps), guarded by a condition
	adam := &compile.Fused{Regs: 3, Leaves: []compile.FusedLeaf{{Kind: compile.LeafFull}, {Kind: compile.LeafFull}, {Kind: compile.LeafFull},
		{Kind: compile.LeafScalar}, {Kind: compile.LeafScalar}, {Kind: compile.LeafCond}},
		Steps: []compile.FusedStep{{Op: graph.OpSqrt, Dst: 0, A: -3}, {Op: graph.OpAdd, Dst: 0, A: 0, B: -5},
			{Op: graph.OpDiv, Dst: 1, A: -2, B: 0}, {Op: graph.OpMul, Dst: 1, A: 1, B: -4}, {Op: graph.OpSub, Dst: 2, A: -1, B: 1},
			{Op: graph.OpWhere, Dst: -1, A: -6, B: 2, C: -1}}}
	chain := &compile.Fused{Regs: 2, Leaves: []compile.FusedLeaf{{Kind: compile.LeafFull}, {Kind: compile.LeafFull}},
		Steps: []compile.FusedStep{{Op: graph.OpTanh, Dst: 0, A: -1}, {Op: graph.OpSigmoid, Dst: 1, A: -2}, {Op: graph.OpMul, Dst: 0, A: 0, B: 1},
			{Op: graph.OpTanhGrad, Dst: 1, A: 0, B: -1}, {Op: graph.OpSigmoidGrad, Dst: 0, A: 1, B: -2}, {Op: graph.OpNeg, Dst: -1, A: 0}}}
	mk := func(f *compile.Fused, shape tensor.Shape) compile.Instr {
		it := ew(graph.OpFused, shape)
		it.Fused = f
		return it
	}
	return []Case{
		{Name: "bias-relu", it: mk(biasRelu, sh(29, 37)), ins: []operand{in32(29, 37), in32(37)}},
		{Name: "adam", it: mk(adam, sh(1031)), ins: []operand{in32(1031), in32(1031), positive(1031), in32(1), positive(1), bools(1)}},
		{Name: "adam-in-place", it: mk(adam, sh(1031)), inPlace: true, ins: []operand{in32(1031), in32(1031), positive(1031), in32(1), positive(1), bools(1)}},
		{Name: "tanh-sigmoid", it: mk(chain, sh(513)), ins: []operand{in32(513), in32(513)}},
	}
}

func reduce(op graph.Op, x tensor.Shape, axes ...int) compile.Instr {
	out := x.Clone()
	st := make([]int, len(x))
	for _, a := range axes {
		out[a] = 1
	}
	s := 1
	for d := len(x) - 1; d >= 0; d-- {
		st[d] = s
		s *= out[d]
	}
	n := 1
	for _, a := range axes {
		st[a] = 0
		n *= x[a]
	}
	it := ew(op, out)
	it.Reduce = &compile.ReduceGeom{XShape: x, DstStrides: st, Scale: 1 / float64(n)}
	return it
}

// rowCases: reductions, the softmax family, moments and layer norm.
func rowCases() []Case {
	var cs []Case
	for _, op := range []graph.Op{graph.OpReduceSum, graph.OpReduceMean, graph.OpReduceMax} {
		cs = append(cs,
			Case{Name: op.String() + "/all", it: reduce(op, sh(7, 9, 11), 0, 1, 2), ins: []operand{in32(7, 9, 11)}},
			Case{Name: op.String() + "/rows", it: reduce(op, sh(37, 1000), 1), ins: []operand{in32(37, 1000)}},
			Case{Name: op.String() + "/columns", it: reduce(op, sh(300, 600), 0), ins: []operand{in32(300, 600)}},
			Case{Name: op.String() + "/middle", it: reduce(op, sh(5, 13, 7), 1), ins: []operand{special(5, 13, 7)}})
	}
	mat := func(op graph.Op, rows, cols int) compile.Instr {
		it := ew(op, sh(rows, cols))
		it.Matrix = &compile.MatrixGeom{Rows: rows, Cols: cols, Eps: 1e-5}
		return it
	}
	for _, size := range [][2]int{{37, 1000}, {65, 10}} {
		r, c := size[0], size[1]
		name := fmt.Sprintf("/%dx%d", r, c)
		cs = append(cs,
			Case{Name: "softmax" + name, it: mat(graph.OpSoftmax, r, c), ins: []operand{in32(r, c)}},
			Case{Name: "log_softmax" + name, it: mat(graph.OpLogSoftmax, r, c), ins: []operand{in32(r, c)}},
			Case{Name: "softmax_grad" + name, it: mat(graph.OpSoftmaxGrad, r, c), ins: []operand{positive(r, c), in32(r, c)}},
			Case{Name: "log_softmax_grad" + name, it: mat(graph.OpLogSoftmaxGrad, r, c), ins: []operand{in32(r, c), in32(r, c)}})
		sce := mat(graph.OpSoftmaxCrossEntropy, r, c)
		sce.Shape = sh(r)
		cs = append(cs, Case{Name: "softmax_cross_entropy" + name, it: sce, ins: []operand{in32(r, c), ints(0, c, r)}},
			Case{Name: "softmax_cross_entropy_grad" + name, it: mat(graph.OpSoftmaxCrossEntropyGrad, r, c),
				ins: []operand{in32(r, c), ints(0, c, r), in32(r)}},
			Case{Name: "softmax_cross_entropy/bad-label" + name, it: sce, ins: []operand{in32(r, c), ints(c, c+3, r)}, wantErr: true})
	}
	mom := mat(graph.OpMoments, 1000, 33)
	mom.Shape = sh(2, 33)
	cs = append(cs, Case{Name: "moments", it: mom, ins: []operand{in32(1000, 33)}})
	ln := mat(graph.OpLayerNorm, 61, 300)
	cs = append(cs,
		Case{Name: "layer_norm", it: ln, ins: []operand{in32(61, 300), in32(300), in32(300)}, parts: []tensor.Shape{sh(61), sh(61)}},
		Case{Name: "layer_norm/no-parts", it: withParts(ln, 2), ins: []operand{in32(61, 300), in32(300), in32(300)}},
		Case{Name: "layer_norm_grad", it: mat(graph.OpLayerNormGrad, 61, 300),
			ins: []operand{in32(61, 300), in32(300), in32(61), positive(61), in32(61, 300)}, parts: []tensor.Shape{sh(300), sh(300)}, tol: 2e-5})
	return cs
}

// withParts returns it with n parts nothing reads.
func withParts(it compile.Instr, n int) compile.Instr {
	it.Parts = make([]int, n)
	for i := range it.Parts {
		it.Parts[i] = -1
	}
	return it
}

func move(op graph.Op, dt tensor.DType, shape tensor.Shape, g *compile.MoveGeom) compile.Instr {
	return compile.Instr{Op: op, DType: dt, InDType: dt, Shape: shape, Move: g}
}

// movementCases: data movement, gather and scatter.
func movementCases() []Case {
	bcast := ew(graph.OpBroadcastTo, sh(3, 5, 7))
	bcast.Broadcast = &compile.BroadcastGeom{AStrides: tensor.BroadcastStrides(sh(5, 1), sh(3, 5, 7))}
	bf := operand{dt: bf16, shape: sh(7, 9, 5)}
	return []Case{
		{Name: "transpose", it: move(graph.OpTranspose, f32, sh(6, 4, 5), &compile.MoveGeom{XShape: sh(4, 5, 6), Perm: []int{2, 0, 1}}), ins: []operand{in32(4, 5, 6)}},
		{Name: "broadcast_to", it: bcast, ins: []operand{in32(5, 1)}},
		{Name: "concat", it: move(graph.OpConcat, f32, sh(4, 5, 5), &compile.MoveGeom{Outer: 4, Inners: []int{15, 10}}), ins: []operand{in32(4, 3, 5), in32(4, 2, 5)}},
		{Name: "slice", it: move(graph.OpSlice, f32, sh(5, 7, 3), &compile.MoveGeom{XShape: sh(7, 9, 5), Starts: []int{1, 2, 0}, Ends: []int{6, 9, 3}}), ins: []operand{in32(7, 9, 5)}},
		{Name: "slice/bfloat16", it: move(graph.OpSlice, bf16, sh(5, 7, 3), &compile.MoveGeom{XShape: sh(7, 9, 5), Starts: []int{1, 2, 0}, Ends: []int{6, 9, 3}}), ins: []operand{bf}},
		{Name: "unslice", it: move(graph.OpUnslice, f32, sh(7, 9, 5), &compile.MoveGeom{Starts: []int{1, 2, 0}, Ends: []int{6, 9, 3}}), ins: []operand{in32(5, 7, 3)}},
		{Name: "unslice_add", it: move(graph.OpUnsliceAdd, f32, sh(7, 9, 5), &compile.MoveGeom{Starts: []int{1, 2, 0}, Ends: []int{6, 9, 3}}), ins: []operand{in32(7, 9, 5), in32(5, 7, 3)}},
		{Name: "unslice_add/in-place", inPlace: true, it: move(graph.OpUnsliceAdd, f32, sh(7, 9, 5), &compile.MoveGeom{Starts: []int{1, 2, 0}, Ends: []int{6, 9, 3}}), ins: []operand{in32(7, 9, 5), in32(5, 7, 3)}},
		{Name: "gather", it: move(graph.OpGather, f32, sh(33, 6), &compile.MoveGeom{RowSize: 6}), ins: []operand{in32(50, 6), ints(0, 50, 33)}},
		{Name: "gather/bad-index", it: move(graph.OpGather, f32, sh(33, 6), &compile.MoveGeom{RowSize: 6}), ins: []operand{in32(50, 6), ints(-2, 60, 33)}, wantErr: true},
		{Name: "scatter_add", it: move(graph.OpScatterAdd, f32, sh(50, 6), &compile.MoveGeom{RowSize: 6}), ins: []operand{ints(0, 50, 333), in32(333, 6)}},
		{Name: "scatter_add/bad-index", it: move(graph.OpScatterAdd, f32, sh(50, 6), &compile.MoveGeom{RowSize: 6}), ins: []operand{ints(0, 51, 333), in32(333, 6)}, wantErr: true},
		{Name: "one_hot", it: move(graph.OpOneHot, f32, sh(37, 10), &compile.MoveGeom{Depth: 10}), ins: []operand{ints(-1, 11, 37)}},
		{Name: "assign", it: move(graph.OpAssign, f32, sh(301), nil), ins: []operand{in32(301), in32(301)}},
		{Name: "cache_write", it: move(graph.OpCacheWrite, f32, sh(3, 10, 2, 5), &compile.MoveGeom{XShape: sh(3, 4, 2, 5)}),
			ins: []operand{in32(3, 10, 2, 5), in32(3, 4, 2, 5), ints(6, 7, 1)}},
		{Name: "cache_write/in-place", inPlace: true, it: move(graph.OpCacheWrite, f32, sh(3, 10, 2, 5), &compile.MoveGeom{XShape: sh(3, 1, 2, 5)}),
			ins: []operand{in32(3, 10, 2, 5), in32(3, 1, 2, 5), ints(0, 10, 1)}},
		{Name: "cache_write/bad-position", it: move(graph.OpCacheWrite, f32, sh(3, 10, 2, 5), &compile.MoveGeom{XShape: sh(3, 4, 2, 5)}),
			ins: []operand{in32(3, 10, 2, 5), in32(3, 4, 2, 5), ints(7, 9, 1)}, wantErr: true},
	}
}

// Cases returns every case: each op the renderer writes, on odd sizes,
// sizes that are not multiples of the block, special values, and bad data
// where an op checks it.
func Cases() []Case {
	var cs []Case
	for _, f := range []func() []Case{elementwiseCases, fusedCases, rowCases, movementCases, visionCases, sequenceCases} {
		cs = append(cs, f()...)
	}
	return cs
}

// Covers reports the ops the renderer writes that no case checks.
func Covers(cs []Case) []graph.Op {
	seen := map[graph.Op]bool{}
	for i := range cs {
		seen[cs[i].it.Op] = true
	}
	var missing []graph.Op
	for op := graph.Op(1); op < graph.NumOps; op++ {
		for _, dt := range []tensor.DType{f32, bl, bf16} {
			if ptxSupports(op, dt) && !seen[op] {
				missing = append(missing, op)
				break
			}
		}
	}
	return missing
}
