package kernels_test

import (
	"testing"

	"github.com/headroom-ml/headroom/kernels"
)

// TestPanics checks that mismatched lengths and shapes, the programmer
// errors, panic with a "kernels: " message naming the kernel.
func TestPanics(t *testing.T) {
	f := func(n int) []float32 { return make([]float32, n) }
	tests := []struct {
		name string
		want string
		call func()
	}{
		{"unary length", "Exp: len(dst) = 2, want 3", func() { kernels.Exp(f(2), f(3)) }},
		{"grad length", "ReluGrad: len(g)", func() { kernels.ReluGrad(f(3), f(3), f(2)) }},
		{"binary length", "Binary: len(b)", func() { kernels.Binary(kernels.Add, f(3), f(3), f(4)) }},
		{"unknown op", "unknown BinaryOp 99", func() { kernels.Binary(99, f(1), f(1), f(1)) }},
		{"unknown compare", "unknown CompareOp", func() {
			kernels.Compare(kernels.CompareOp(42), make([]uint8, 1), f(1), f(1), []int{1}, []int{1}, []int{1})
		}},
		{"broadcast dst", "BinaryBroadcast: len(dst) = 5, want 6", func() {
			kernels.BinaryBroadcast(kernels.Add, f(5), f(6), f(3), []int{2, 3}, []int{3, 1}, []int{0, 1})
		}},
		{"broadcast operand", "BinaryBroadcast: b has 4 elements", func() {
			kernels.BinaryBroadcast(kernels.Add, f(6), f(6), f(4), []int{2, 3}, []int{3, 1}, []int{0, 1})
		}},
		{"stride count", "1 strides for a", func() {
			kernels.BinaryBroadcast(kernels.Add, f(6), f(6), f(3), []int{2, 3}, []int{1}, []int{0, 1})
		}},
		{"negative stride", "negative stride", func() { kernels.BroadcastTo(f(3), f(3), []int{3}, []int{-1}) }},
		{"rank", "rank 9 exceeds", func() { kernels.BroadcastTo(f(1), f(1), make([]int, 9), make([]int, 9)) }},
		{"reduce dst", "ReduceSum: len(dst) = 2, want 3", func() { kernels.ReduceSum(f(2), f(6), []int{2, 3}, []int{0, 1}) }},
		{"reduce x", "ReduceMax: len(x)", func() { kernels.ReduceMax(f(3), f(5), []int{2, 3}, []int{0, 1}) }},
		{"sum rows", "SumRows: len(dst)", func() { kernels.SumRows(f(2), f(6), 2, 3) }},
		{"matmul a", "MatMul: len(a) = 5, want 6", func() { kernels.MatMul(f(4), f(5), f(6), 2, 2, 3, false, false, false) }},
		{"matmul negative", "MatMul: negative size", func() { kernels.MatMul(f(0), f(0), f(0), -1, 0, 0, false, false, false) }},
		{"softmax", "Softmax: len(x) = 5, want 6", func() { kernels.Softmax(f(6), f(5), 2, 3) }},
		{"cross-entropy labels", "SoftmaxCrossEntropy: len(labels)", func() {
			kernels.SoftmaxCrossEntropy(f(2), f(6), []int32{0}, 2, 3)
		}},
		{"transpose perm", "not a permutation", func() { kernels.Transpose(f(6), f(6), []int{2, 3}, []int{0, 0}) }},
		{"slice region", "Slice: region", func() { kernels.Slice(f(1), f(6), []int{2, 3}, []int{0, 2}, []int{1, 4}) }},
		{"unslice starts", "Unslice: 3 starts", func() { kernels.Unslice(f(6), f(1), []int{2, 3}, []int{0, 0, 0}) }},
		{"concat part", "Concat: part 1", func() { kernels.Concat(f(6), [][]float32{f(2), f(3)}, 2, []int{1, 2}) }},
		{"gather rows", "Gather: len(params) = 7 is not a multiple", func() { kernels.Gather(f(3), f(7), []int32{0}, 3) }},
		{"scatter g", "ScatterAdd: len(g)", func() { kernels.ScatterAdd(f(6), []int32{0, 1}, f(3), 3) }},
		{"one hot", "OneHot: len(dst)", func() { kernels.OneHot(f(5), []int32{0, 1}, 3) }},
		{"convert", "Convert: len(dst)", func() { kernels.Convert(make([]int32, 2), f(3)) }},
		{"bf16", "Float32ToBF16: len(dst)", func() { kernels.Float32ToBF16(nil, f(1)) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { mustPanic(t, tc.want, tc.call) })
	}
}
