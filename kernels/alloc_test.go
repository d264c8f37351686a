package kernels_test

import (
	"testing"

	"github.com/headroom-ml/headroom/kernels"
	"github.com/headroom-ml/headroom/tensor"
)

// TestNoAllocs checks that a representative call of every kernel, in both
// float types where generic, allocates nothing: the runtime's zero-allocation
// step rests on it.
func TestNoAllocs(t *testing.T) {
	const rows, cols = 6, 10
	x64 := make([]float64, rows*cols)
	for i := range x64 {
		x64[i] = float64(i%7) - 3
	}
	x := f32(x64)
	y := make([]float32, rows*cols)
	dst, dst64 := make([]float32, rows*cols), make([]float64, rows*cols)
	vec, vec64 := make([]float32, cols), make([]float64, cols)
	rowv := make([]float32, rows)
	labels := []int32{0, 3, 9, 1, 2, 5}
	shape := []int{rows, cols}
	full, bias := tensor.BroadcastStrides(tensor.Shape(shape), tensor.Shape(shape)), tensor.BroadcastStrides(tensor.Shape{cols}, tensor.Shape(shape))
	colSt := tensor.BroadcastStrides(tensor.Shape{1, cols}, tensor.Shape(shape))
	rowSt := tensor.BroadcastStrides(tensor.Shape{rows, 1}, tensor.Shape(shape))
	mask := make([]uint8, rows*cols)
	shape3, perm3 := []int{2, 3, 10}, []int{2, 0, 1}
	parts := [][]float32{x[:rows*4], x[rows*4:]}
	inners := []int{4, 6}
	starts, ends := []int{1, 2}, []int{5, 9}
	sliced := make([]float32, 4*7)
	ints, bytes := make([]int32, rows*cols), make([]uint8, rows*cols)
	bf, hf := make([]tensor.BF16, rows*cols), make([]tensor.F16, rows*cols)
	idx := []int32{3, 1, 4, 1}

	// a convolution the direct tiles run (16 filters, padded sides), and
	// its gradients
	cg := kernels.NewConvGeom(2, 6, 6, 3, 3, 3, 1, 1, true)
	cx, cf := make([]float32, 2*6*6*3), make([]float32, 3*3*3*16)
	cy, cwork := make([]float32, 2*6*6*16), make([]float32, 4*cg.Im2ColSize(2)+4096)

	calls := map[string]func(){
		"Conv2D":               func() { kernels.Conv2D(cy, cx, cf, cwork, cg, 16) },
		"Conv2DBackpropInput":  func() { kernels.Conv2DBackpropInput(cx, cy, cf, cwork, cg, 16) },
		"Conv2DBackpropFilter": func() { kernels.Conv2DBackpropFilter(cf, cx, cy, cwork, cg, 16) },
		"Neg":                  func() { kernels.Neg(dst, x) },
		"Exp":                  func() { kernels.Exp(dst64, x64) },
		"Log":                  func() { kernels.Log(dst, x) },
		"Sqrt":                 func() { kernels.Sqrt(dst, x) },
		"Relu":                 func() { kernels.Relu(dst, x) },
		"Sigmoid":              func() { kernels.Sigmoid(dst64, x64) },
		"Tanh":                 func() { kernels.Tanh(dst, x) },
		"Copy":                 func() { kernels.Copy(dst, x) },
		"Fill":                 func() { kernels.Fill(dst, 1) },
		"ReluGrad":             func() { kernels.ReluGrad(dst, x, y) },
		"SigmoidGrad":          func() { kernels.SigmoidGrad(dst, x, y) },
		"TanhGrad":             func() { kernels.TanhGrad(dst64, x64, x64) },
		"LSTMCellRows":         func() { kernels.LSTMCellRows(x[:12], y[:12], dst[:60], x[:48], y[12:24], 6, 0, 2) },
		"LSTMCellGradRows":     func() { kernels.LSTMCellGradRows(dst[:48], y[:12], x[:60], x[:12], x[12:24], x[24:36], 6, 0, 2) },
		"GRUCellRows":          func() { kernels.GRUCellRows(y[:12], dst[:48], x[:36], x[:36], x[36:48], 6, 0, 2) },
		"GRUCellGradRows":      func() { kernels.GRUCellGradRows(dst[:36], y[:36], y[36:48], x[:48], x[:12], x[12:24], 6, 0, 2) },
		"LSTMCellGradRows float64": func() {
			kernels.LSTMCellGradRows(dst64[:48], nil, x64[:60], x64[:12], x64[12:24], nil, 6, 0, 2)
		},
		"Binary":                  func() { kernels.Binary(kernels.Pow, dst, x, y) },
		"BinaryScalar":            func() { kernels.BinaryScalar(kernels.Div, dst, x, 3) },
		"ScalarBinary":            func() { kernels.ScalarBinary(kernels.Max, dst, 0, x) },
		"BinaryBroadcast bias":    func() { kernels.BinaryBroadcast(kernels.Add, dst, x, vec, shape, full, bias) },
		"BinaryBroadcast outer":   func() { kernels.BinaryBroadcast(kernels.Mul, dst64, x64[:rows], vec64, shape, rowSt, colSt) },
		"Compare":                 func() { kernels.Compare(kernels.Less, mask, x, vec, shape, full, bias) },
		"Where":                   func() { kernels.Where(dst, mask, x, y, shape, full, full, full) },
		"BroadcastTo":             func() { kernels.BroadcastTo(dst, vec, shape, bias) },
		"ReduceSum rows":          func() { kernels.ReduceSum(vec, x, shape, colSt) },
		"ReduceSum cols":          func() { kernels.ReduceSum(rowv, x, shape, rowSt[:]) },
		"ReduceMax":               func() { kernels.ReduceMax(vec64, x64, shape, colSt) },
		"SumRows":                 func() { kernels.SumRows(vec, x, rows, cols) },
		"MatMul":                  func() { kernels.MatMul(dst[:rows*rows], x, y, rows, rows, cols, false, true, false) },
		"MatMul TT":               func() { kernels.MatMul(dst64[:rows*rows], x64, x64, rows, rows, cols, true, true, true) },
		"Softmax":                 func() { kernels.Softmax(dst, x, rows, cols) },
		"LogSoftmax":              func() { kernels.LogSoftmax(dst64, x64, rows, cols) },
		"SoftmaxGrad":             func() { kernels.SoftmaxGrad(dst, x, y, rows, cols) },
		"LogSoftmaxGrad":          func() { kernels.LogSoftmaxGrad(dst, x, y, rows, cols) },
		"SoftmaxCrossEntropy":     func() { kernels.SoftmaxCrossEntropy(rowv, x, labels, rows, cols) },
		"SoftmaxCrossEntropyGrad": func() { kernels.SoftmaxCrossEntropyGrad(dst, x, labels, rowv, rows, cols) },
		"Transpose":               func() { kernels.Transpose(dst, x, shape3, perm3) },
		"Transpose tiled":         func() { kernels.Transpose(dst64, x64, shape, []int{1, 0}) },
		"Slice":                   func() { kernels.Slice(sliced, x, shape, starts, ends) },
		"Unslice":                 func() { kernels.UnsliceRegion(dst, sliced, shape, starts, ends) },
		"Concat":                  func() { kernels.Concat(dst, parts, rows, inners) },
		"Split":                   func() { kernels.Split(parts, dst, rows, inners) },
		"Gather":                  func() { kernels.Gather(dst[:4*cols], x, idx, cols) },
		"ScatterAdd":              func() { kernels.ScatterAdd(dst, idx, x[:4*cols], cols) },
		"OneHot":                  func() { kernels.OneHot(dst[:4*10], idx, 10) },
		"Convert float->int":      func() { kernels.Convert(ints, x) },
		"Convert int->float":      func() { kernels.Convert(dst64, ints) },
		"Convert uint8":           func() { kernels.Convert(bytes, x64) },
		"Float32ToBF16":           func() { kernels.Float32ToBF16(bf, x) },
		"BF16ToFloat32":           func() { kernels.BF16ToFloat32(dst, bf) },
		"Float32ToF16":            func() { kernels.Float32ToF16(hf, x) },
		"F16ToFloat32":            func() { kernels.F16ToFloat32(dst, hf) },
	}
	for name, call := range calls {
		if n := testing.AllocsPerRun(10, call); n != 0 {
			t.Errorf("%s: %v allocations per call, want 0", name, n)
		}
	}
}
