package ptxtest

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

// sequenceCases: matrix products (batched, shared, transposed, bfloat16),
// attention forward and backward (causal both ways, a mask), the LSTM
// step and its gradient (lstmCases) and the GRU's (gruCases).
func sequenceCases() []Case {
	var cs []Case
	for _, g := range []compile.MatMulGeom{
		{M: 37, N: 29, K: 41, Batch: 1},
		{M: 13, N: 7, K: 19, Batch: 3, TransA: true},
		{M: 13, N: 7, K: 19, Batch: 3, TransB: true, SharedB: true},
		{M: 9, N: 11, K: 5, Batch: 4, SharedB: true},
		{M: 33, N: 17, K: 21, Batch: 2, BF16: true},
	} {
		a, b := sh(g.Batch, g.M, g.K), sh(g.Batch, g.K, g.N)
		if g.TransA {
			a = sh(g.Batch, g.K, g.M)
		}
		if g.SharedB {
			b = sh(g.K, g.N)
		}
		if g.TransB {
			b = sh(b[:len(b)-2]...)
			if g.SharedB {
				b = sh(g.N, g.K)
			} else {
				b = sh(g.Batch, g.N, g.K)
			}
		}
		geom := g
		it := compile.Instr{Op: graph.OpMatMul, DType: f32, InDType: f32, Shape: sh(g.Batch, g.M, g.N), MatMul: &geom}
		tol := 2e-5
		if g.BF16 {
			tol = 1e-4
		}
		cs = append(cs, Case{Name: fmt.Sprintf("matmul/%+v", g), it: it, ins: []operand{in32(a...), in32(b...)}, tol: tol})
	}
	for _, a := range []compile.AttnGeom{
		{B: 2, Tq: 37, Tk: 37, H: 3, D: 8, Causal: graph.CausalBottomRight},
		{B: 1, Tq: 5, Tk: 300, H: 2, D: 7, Causal: graph.CausalBottomRight},
		{B: 2, Tq: 9, Tk: 6, H: 2, D: 4, Causal: graph.CausalTopLeft},
		{B: 2, Tq: 11, Tk: 13, H: 1, D: 16},
		{B: 2, Tq: 11, Tk: 13, H: 2, D: 5, MaskIn: 3},
	} {
		a.Scale = 1 / math.Sqrt(float64(a.D))
		if a.MaskIn == 0 {
			a.MaskIn = -1
		}
		a.StepIn = -1
		q, k := sh(a.B, a.Tq, a.H, a.D), sh(a.B, a.Tk, a.H, a.D)
		lse := sh(a.B, a.H, a.Tq)
		fwd, bwd := a, a
		ins := []operand{in32(q...), in32(k...), in32(k...)}
		if a.MaskIn >= 0 {
			ins = append(ins, operand{dt: tensor.Uint8, shape: sh(a.B, a.Tq, a.Tk), fill: func(r *rand.Rand, _ int) float64 { return float64(r.IntN(4) / 3) }})
		}
		name := fmt.Sprintf("B%d-Tq%d-Tk%d-H%d-D%d-causal%d-mask%v", a.B, a.Tq, a.Tk, a.H, a.D, a.Causal, a.MaskIn >= 0)
		cs = append(cs, Case{Name: "attention/" + name, it: compile.Instr{Op: graph.OpAttention, DType: f32, InDType: f32, Shape: q, Attention: &fwd},
			ins: ins, parts: []tensor.Shape{lse}, tol: 2e-5})
		// the gradient: q, k, v, o, lse, do (and the mask); lse from a
		// plausible range
		gins := []operand{in32(q...), in32(k...), in32(k...), in32(q...),
			{dt: f32, shape: lse, fill: func(r *rand.Rand, _ int) float64 { return 2 + r.Float64() }}, in32(q...)}
		if a.MaskIn >= 0 {
			bwd.MaskIn = 6
			gins = append(gins, ins[3])
		}
		cs = append(cs, Case{Name: "attention_grad/" + name, it: compile.Instr{Op: graph.OpAttentionGrad, DType: f32, InDType: f32, Shape: q, Attention: &bwd},
			ins: gins, parts: []tensor.Shape{k, k}, tol: 5e-5})
	}
	cs = append(cs, lstmCases()...)
	return append(cs, gruCases()...)
}

// cellInstr is a recurrent step's instruction (op) of B rows and n units
// whose output is width·n wide.
func cellInstr(op graph.Op, B, n, width int) compile.Instr {
	it := ew(op, sh(B, width*n))
	it.Matrix = &compile.MatrixGeom{Rows: B, Cols: n}
	return it
}

// wideOperand draws N(0, 9): a step's gates saturate too.
func wideOperand(s ...int) operand {
	return operand{dt: f32, shape: sh(s...), fill: func(r *rand.Rand, _ int) float64 { return 3 * r.NormFloat64() }}
}

// lstmCases: the LSTM step (with and without a previous state, its parts
// read or not, special values) and its gradient (with and without a
// previous state, dcPrev read or not), on odd sizes and rows past a block.
func lstmCases() []Case {
	var cs []Case
	// acts: i, f, o in (0, 1); g and tanh c in (-1, 1)
	acts := func(B, n int) operand {
		return operand{dt: f32, shape: sh(B, 5*n), fill: func(r *rand.Rand, k int) float64 {
			if gate := k % (5 * n) / n; gate == 2 || gate == 4 {
				return 2*r.Float64() - 1
			}
			return r.Float64()
		}}
	}
	for _, size := range [][2]int{{3, 5}, {7, 33}, {5, 130}} {
		B, n := size[0], size[1]
		name := fmt.Sprintf("/B%d-n%d", B, n)
		cell := cellInstr(graph.OpLSTMCell, B, n, 1)
		parts := []tensor.Shape{sh(B, n), sh(B, 5*n)}
		grad := cellInstr(graph.OpLSTMCellGrad, B, n, 4)
		cs = append(cs,
			Case{Name: "lstm_cell" + name, it: cell, ins: []operand{wideOperand(B, 4*n), wideOperand(B, n)}, parts: parts},
			Case{Name: "lstm_cell/no-state" + name, it: cell, ins: []operand{wideOperand(B, 4*n)}, parts: parts},
			Case{Name: "lstm_cell/no-parts" + name, it: withParts(cell, 2), ins: []operand{wideOperand(B, 4*n), wideOperand(B, n)}},
			Case{Name: "lstm_cell_grad" + name, it: grad, ins: []operand{acts(B, n), in32(B, n), in32(B, n), wideOperand(B, n)},
				parts: []tensor.Shape{sh(B, n)}},
			Case{Name: "lstm_cell_grad/no-state" + name, it: withParts(grad, 1), ins: []operand{acts(B, n), in32(B, n), in32(B, n)}},
			Case{Name: "lstm_cell_grad/no-parts" + name, it: withParts(grad, 1), ins: []operand{acts(B, n), in32(B, n), in32(B, n), wideOperand(B, n)}})
	}
	cs = append(cs, Case{Name: "lstm_cell/special", it: cellInstr(graph.OpLSTMCell, 4, 37, 1), ins: []operand{special(4, 4*37), special(4, 37)},
		parts: []tensor.Shape{sh(4, 37), sh(4, 5*37)}})
	return cs
}

// gruCases: the GRU step (x alone, with u, with u and hPrev; its part
// read or not; special values) and its gradient (with and without hPrev,
// its parts read or not; u_h 0 as a step without u keeps it), on odd
// sizes and rows past a block.
func gruCases() []Case {
	var cs []Case
	// acts: z, r in (0, 1); h' in (-1, 1); u_h N(0, 9), or 0 (noU)
	acts := func(B, n int, noU bool) operand {
		return operand{dt: f32, shape: sh(B, 4*n), fill: func(r *rand.Rand, k int) float64 {
			switch k % (4 * n) / n {
			case 2:
				return 2*r.Float64() - 1
			case 3:
				if noU {
					return 0
				}
				return 3 * r.NormFloat64()
			}
			return r.Float64()
		}}
	}
	for _, size := range [][2]int{{3, 5}, {7, 33}, {5, 130}} {
		B, n := size[0], size[1]
		name := fmt.Sprintf("/B%d-n%d", B, n)
		cell := cellInstr(graph.OpGRUCell, B, n, 1)
		actsShape := []tensor.Shape{sh(B, 4*n)}
		grad := cellInstr(graph.OpGRUCellGrad, B, n, 3)
		x, u, h := wideOperand(B, 3*n), wideOperand(B, 3*n), wideOperand(B, n)
		du := []tensor.Shape{sh(B, 3*n)}
		cs = append(cs,
			Case{Name: "gru_cell" + name, it: cell, ins: []operand{x, u, h}, parts: actsShape},
			Case{Name: "gru_cell/no-state" + name, it: cell, ins: []operand{x, u}, parts: actsShape},
			Case{Name: "gru_cell/input-only" + name, it: cell, ins: []operand{x}, parts: actsShape},
			Case{Name: "gru_cell/no-parts" + name, it: withParts(cell, 1), ins: []operand{x, u, h}},
			Case{Name: "gru_cell/input-only-no-parts" + name, it: withParts(cell, 1), ins: []operand{x}},
			Case{Name: "gru_cell_grad" + name, it: grad, ins: []operand{acts(B, n, false), in32(B, n), h},
				parts: []tensor.Shape{sh(B, 3*n), sh(B, n)}},
			Case{Name: "gru_cell_grad/no-state" + name, it: withParts(grad, 2), ins: []operand{acts(B, n, false), in32(B, n)},
				parts: du},
			Case{Name: "gru_cell_grad/input-only" + name, it: withParts(grad, 2), ins: []operand{acts(B, n, true), in32(B, n)}},
			Case{Name: "gru_cell_grad/dhprev-unread" + name, it: withParts(grad, 2), ins: []operand{acts(B, n, false), in32(B, n), h},
				parts: du},
			Case{Name: "gru_cell_grad/no-parts" + name, it: withParts(grad, 2), ins: []operand{acts(B, n, false), in32(B, n), h}})
	}
	cs = append(cs, Case{Name: "gru_cell/special", it: cellInstr(graph.OpGRUCell, 4, 37, 1),
		ins: []operand{special(4, 3*37), special(4, 3*37), special(4, 37)}, parts: []tensor.Shape{sh(4, 4*37)}})
	return cs
}
