package cpu

import (
	"slices"
	"testing"

	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/kernels"
	"github.com/headroom-ml/headroom/tensor"
)

// TestPackGroups checks which products share a packing of their second
// operand: the same buffer, transpose and shape, at least minPackGroup of
// them, and no write to the buffer between them; and that groups placed
// in one area overlap only where their products do not.
func TestPackGroups(t *testing.T) {
	mm := func(out, a, b int, n, k int, transB bool) compile.Instr {
		return compile.Instr{Op: graph.OpMatMul, DType: tensor.Float32, Out: out, In: []int{a, b}, Work: -1,
			MatMul: &compile.MatMulGeom{M: 4, N: n, K: k, Batch: 1, TransB: transB}}
	}
	write := func(out int) compile.Instr {
		return compile.Instr{Op: graph.OpAdd, DType: tensor.Float32, Out: out, In: []int{1, 2}, Work: -1}
	}
	steps := func(n int, f func(i int) compile.Instr) []compile.Instr {
		var out []compile.Instr
		for i := range n {
			out = append(out, f(i))
		}
		return out
	}
	size := alignFloats(kernels.PackedBLen(64, 32))
	for _, c := range []struct {
		name    string
		instrs  []compile.Instr
		members [][]int
		offs    []int
		floats  int
	}{
		{"one group", steps(9, func(i int) compile.Instr { return mm(100+i, 10+i, 5, 64, 32, false) }),
			[][]int{{0, 1, 2, 3, 4, 5, 6, 7, 8}}, []int{0}, size},
		{"too few", steps(7, func(i int) compile.Instr { return mm(100+i, 10+i, 5, 64, 32, false) }), nil, nil, 0},
		{"a write splits it", append(append(steps(5, func(i int) compile.Instr { return mm(100+i, 10+i, 5, 64, 32, false) }), write(5)),
			steps(5, func(i int) compile.Instr { return mm(200+i, 10+i, 5, 64, 32, false) })...), nil, nil, 0},
		{"a write elsewhere does not", append(append(steps(5, func(i int) compile.Instr { return mm(100+i, 10+i, 5, 64, 32, false) }), write(6)),
			steps(5, func(i int) compile.Instr { return mm(200+i, 10+i, 5, 64, 32, false) })...),
			[][]int{{0, 1, 2, 3, 4, 6, 7, 8, 9, 10}}, []int{0}, size},
		{"transposes and shapes apart", steps(16, func(i int) compile.Instr { return mm(100+i, 10+i, 5, 64, 32, i%2 == 1) }),
			[][]int{{0, 2, 4, 6, 8, 10, 12, 14}, {1, 3, 5, 7, 9, 11, 13, 15}}, []int{0, size}, 2 * size},
		{"one after the other share the area", append(steps(8, func(i int) compile.Instr { return mm(100+i, 10+i, 5, 64, 32, false) }),
			steps(8, func(i int) compile.Instr { return mm(200+i, 10+i, 5, 64, 32, true) })...),
			[][]int{{0, 1, 2, 3, 4, 5, 6, 7}, {8, 9, 10, 11, 12, 13, 14, 15}}, []int{0, 0}, size},
		{"bfloat16 and batches stay out", steps(9, func(i int) compile.Instr {
			it := mm(100+i, 10+i, 5, 64, 32, false)
			if i%2 == 0 {
				it.MatMul.BF16 = true
			} else {
				it.MatMul.Batch = 2
			}
			return it
		}), nil, nil, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			groups, floats := packGroups(c.instrs)
			if len(groups) != len(c.members) || floats != c.floats {
				t.Fatalf("%d groups over %d floats, want %d over %d", len(groups), floats, len(c.members), c.floats)
			}
			for i, g := range groups {
				if !slices.Equal(g.members, c.members[i]) || g.off != c.offs[i] {
					t.Errorf("group %d: members %v at %d, want %v at %d", i, g.members, g.off, c.members[i], c.offs[i])
				}
			}
		})
	}
}
