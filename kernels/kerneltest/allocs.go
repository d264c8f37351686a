package kerneltest

import (
	"testing"

	"github.com/headroom-ml/headroom/kernels"
	"github.com/headroom-ml/headroom/tensor"
)

// testAllocs checks that one representative call of every non-nil kernel
// allocates nothing.
func testAllocs(t *testing.T, impl Impl) {
	r := newRand(14)
	const rows, cols = 8, 33
	x, y, g := uniform(r, rows*cols, -1, 1), uniform(r, rows*cols, 0, 1), uniform(r, rows*cols, -1, 1)
	dst, vec, rowv := make([]float32, rows*cols), uniform(r, cols, -1, 1), make([]float32, rows)
	labels := labelsFor(15, rows, cols, false)
	shape, bshape := []int{rows, cols}, []int{cols}
	xst, bst := tensor.BroadcastStrides(shape, shape), tensor.BroadcastStrides(bshape, shape)
	_, sumSt := keepdims(tensor.Shape(shape), []int{0})
	perm := []int{1, 0}
	bf, hf := make([]tensor.BF16, len(x)), make([]tensor.F16, len(x))
	ap, aq, ak, av, ado := attnInputs(16, attnCase{b: 1, tq: 9, tk: 33, h: 2, d: 8, causal: true, mask: true, rate: 0.1})
	ao, alse, adq, adk, adv := make([]float32, len(aq)), make([]float32, 2*9), make([]float32, len(aq)), make([]float32, len(ak)), make([]float32, len(ak))
	awork := attnWorkspace(ap, impl.Threads)
	// pooling and convolution: same padding, stride 2 down the rows, 16
	// channels (the vector loops where there are some)
	pg := kernels.NewConvGeom(2, 7, 6, 16, 3, 2, 2, 1, true)
	const pf = 5
	px, pdx := uniform(r, pg.N*pg.H*pg.W*pg.C, -1, 1), make([]float32, pg.N*pg.H*pg.W*pg.C)
	py, pdy := make([]float32, pg.N*pg.OH*pg.OW*pg.C), uniform(r, pg.N*pg.OH*pg.OW*pg.C, -1, 1)
	cfilt, cdfilt := uniform(r, pg.KH*pg.KW*pg.C*pf, -1, 1), make([]float32, pg.KH*pg.KW*pg.C*pf)
	cy, cdy := make([]float32, pg.N*pg.OH*pg.OW*pf), uniform(r, pg.N*pg.OH*pg.OW*pf, -1, 1)
	cwork := make([]float32, pg.Im2ColSize(2))

	calls := []struct {
		name string
		set  bool
		call func()
	}{
		{"Neg", impl.Neg != nil, func() { impl.Neg(dst, x) }},
		{"Exp", impl.Exp != nil, func() { impl.Exp(dst, x) }},
		{"Log", impl.Log != nil, func() { impl.Log(dst, y) }},
		{"Sqrt", impl.Sqrt != nil, func() { impl.Sqrt(dst, y) }},
		{"Relu", impl.Relu != nil, func() { impl.Relu(dst, x) }},
		{"Sigmoid", impl.Sigmoid != nil, func() { impl.Sigmoid(dst, x) }},
		{"Tanh", impl.Tanh != nil, func() { impl.Tanh(dst, x) }},
		{"ReluGrad", impl.ReluGrad != nil, func() { impl.ReluGrad(dst, x, g) }},
		{"SigmoidGrad", impl.SigmoidGrad != nil, func() { impl.SigmoidGrad(dst, y, g) }},
		{"TanhGrad", impl.TanhGrad != nil, func() { impl.TanhGrad(dst, y, g) }},
		{"Binary", impl.Binary != nil, func() { impl.Binary(kernels.Mul, dst, x, y) }},
		{"BinaryScalar", impl.BinaryScalar != nil, func() { impl.BinaryScalar(kernels.Add, dst, x, 2) }},
		{"ScalarBinary", impl.ScalarBinary != nil, func() { impl.ScalarBinary(kernels.Sub, dst, 1, x) }},
		{"BinaryBroadcast", impl.BinaryBroadcast != nil, func() { impl.BinaryBroadcast(kernels.Add, dst, x, vec, shape, xst, bst) }},
		{"ReduceSum", impl.ReduceSum != nil, func() { impl.ReduceSum(vec, x, shape, sumSt) }},
		{"ReduceMax", impl.ReduceMax != nil, func() { impl.ReduceMax(vec, x, shape, sumSt) }},
		{"SumRows", impl.SumRows != nil, func() { impl.SumRows(vec, x, rows, cols) }},
		{"MatMul", impl.MatMul != nil, func() { impl.MatMul(dst[:rows*rows], x, y, rows, rows, cols, false, true, false) }},
		{"Softmax", impl.Softmax != nil, func() { impl.Softmax(dst, x, rows, cols) }},
		{"LogSoftmax", impl.LogSoftmax != nil, func() { impl.LogSoftmax(dst, x, rows, cols) }},
		{"SoftmaxGrad", impl.SoftmaxGrad != nil, func() { impl.SoftmaxGrad(dst, y, g, rows, cols) }},
		{"LogSoftmaxGrad", impl.LogSoftmaxGrad != nil, func() { impl.LogSoftmaxGrad(dst, x, g, rows, cols) }},
		{"SoftmaxCrossEntropy", impl.SoftmaxCrossEntropy != nil, func() { impl.SoftmaxCrossEntropy(rowv, x, labels, rows, cols) }},
		{"SoftmaxCrossEntropyGrad", impl.SoftmaxCrossEntropyGrad != nil, func() { impl.SoftmaxCrossEntropyGrad(dst, x, labels, rowv, rows, cols) }},
		{"Transpose", impl.Transpose != nil, func() { impl.Transpose(dst, x, shape, perm) }},
		{"MatMulBF16", impl.MatMulBF16 != nil, func() { impl.MatMulBF16(dst[:rows*rows], x, y, rows, rows, cols, false, true, false) }},
		{"MaxPool2D", impl.MaxPool2D != nil, func() { impl.MaxPool2D(py, px, pg) }},
		{"MaxPool2DGrad", impl.MaxPool2DGrad != nil, func() { impl.MaxPool2DGrad(pdx, px, pdy, pg) }},
		{"MaxPool2DReluGrad", impl.MaxPool2DReluGrad != nil, func() { impl.MaxPool2DReluGrad(pdx, px, pdy, pg) }},
		{"AvgPool2D", impl.AvgPool2D != nil, func() { impl.AvgPool2D(py, px, pg) }},
		{"AvgPool2DGrad", impl.AvgPool2DGrad != nil, func() { impl.AvgPool2DGrad(pdx, pdy, pg) }},
		{"Conv2D", impl.Conv2D != nil, func() { impl.Conv2D(cy, px, cfilt, cwork, pg, pf) }},
		{"Conv2DBackpropInput", impl.Conv2DBackpropInput != nil, func() { impl.Conv2DBackpropInput(pdx, cdy, cfilt, cwork, pg, pf) }},
		{"Conv2DBackpropFilter", impl.Conv2DBackpropFilter != nil, func() { impl.Conv2DBackpropFilter(cdfilt, px, cdy, cwork, pg, pf) }},
		{"Conv2DBF16", impl.Conv2DBF16 != nil, func() { impl.Conv2DBF16(cy, px, cfilt, cwork, pg, pf) }},
		{"Conv2DBackpropInputBF16", impl.Conv2DBackpropInputBF16 != nil, func() { impl.Conv2DBackpropInputBF16(pdx, cdy, cfilt, cwork, pg, pf) }},
		{"Conv2DBackpropFilterBF16", impl.Conv2DBackpropFilterBF16 != nil, func() { impl.Conv2DBackpropFilterBF16(cdfilt, px, cdy, cwork, pg, pf) }},
		{"Float32ToBF16", impl.Float32ToBF16 != nil, func() { impl.Float32ToBF16(bf, x) }},
		{"BF16ToFloat32", impl.BF16ToFloat32 != nil, func() { impl.BF16ToFloat32(dst, bf) }},
		{"Float32ToF16", impl.Float32ToF16 != nil, func() { impl.Float32ToF16(hf, x) }},
		{"F16ToFloat32", impl.F16ToFloat32 != nil, func() { impl.F16ToFloat32(dst, hf) }},
		{"AttentionForward", impl.AttentionForward != nil, func() { impl.AttentionForward(ao, alse, aq, ak, av, ap, awork) }},
		{"AttentionBackward", impl.AttentionBackward != nil, func() {
			impl.AttentionBackward(adq, adk, adv, ado, ao, alse, aq, ak, av, ap, awork)
		}},
	}
	for _, c := range calls {
		if !c.set {
			continue
		}
		if n := testing.AllocsPerRun(5, c.call); n != 0 {
			t.Errorf("%s: %v allocations per call, want 0", c.name, n)
		}
	}
}
