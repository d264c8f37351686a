package kernels_test

import (
	"fmt"
	"testing"

	"github.com/headroom-ml/headroom/internal/testutil"
	"github.com/headroom-ml/headroom/kernels"
	"github.com/headroom-ml/headroom/tensor"
)

// benchMatMul times dst [m, n] = a [m, k] · b [k, n] in float32 and reports
// GFLOP/s (2·m·n·k floating-point operations per product).
func benchMatMul(b *testing.B, m, n, k int, transA, transB bool) {
	r := rng(1)
	a, w := testutil.RandFloat32s(r, m*k), testutil.RandFloat32s(r, k*n)
	dst := make([]float32, m*n)
	b.SetBytes(int64(4 * (m*k + k*n + m*n)))
	b.ResetTimer()
	for b.Loop() {
		kernels.MatMul(dst, a, w, m, n, k, transA, transB, false)
	}
	b.ReportMetric(2*float64(m)*float64(n)*float64(k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

func BenchmarkMatMul(b *testing.B) {
	b.Run("128x784x1024", func(b *testing.B) { benchMatMul(b, 128, 1024, 784, false, false) })
	b.Run("256", func(b *testing.B) { benchMatMul(b, 256, 256, 256, false, false) })
	b.Run("512", func(b *testing.B) { benchMatMul(b, 512, 512, 512, false, false) })
	b.Run("1024", func(b *testing.B) { benchMatMul(b, 1024, 1024, 1024, false, false) })
	// The backward-pass layouts of a dense layer: dW = xᵀ·dy, dx = dy·Wᵀ.
	b.Run("128x784x1024/TN", func(b *testing.B) { benchMatMul(b, 784, 1024, 128, true, false) })
	b.Run("128x784x1024/NT", func(b *testing.B) { benchMatMul(b, 128, 784, 1024, false, true) })
	b.Run("256/TT", func(b *testing.B) { benchMatMul(b, 256, 256, 256, true, true) })
}

// benchBiasAdd times the bias add [rows, cols] + [cols] through
// BinaryBroadcast and reports GB/s of dst written.
func benchBiasAdd(b *testing.B, rows, cols int) {
	r := rng(2)
	x, bias := testutil.RandFloat32s(r, rows*cols), testutil.RandFloat32s(r, cols)
	dst := make([]float32, rows*cols)
	shape := tensor.Shape{rows, cols}
	xs, bs := tensor.BroadcastStrides(shape, shape), tensor.BroadcastStrides(tensor.Shape{cols}, shape)
	b.SetBytes(int64(4 * rows * cols))
	b.ResetTimer()
	for b.Loop() {
		kernels.BinaryBroadcast(kernels.Add, dst, x, bias, shape, xs, bs)
	}
}

func BenchmarkBiasAdd(b *testing.B) {
	for _, s := range [][2]int{{128, 1024}, {1024, 10}, {32, 65536}} {
		b.Run(fmt.Sprintf("%dx%d", s[0], s[1]), func(b *testing.B) { benchBiasAdd(b, s[0], s[1]) })
	}
	// The same adds without broadcasting, for comparison.
	b.Run("Binary/128x1024", func(b *testing.B) {
		x, y := make([]float32, 128*1024), make([]float32, 128*1024)
		b.SetBytes(4 * 128 * 1024)
		for b.Loop() {
			kernels.Binary(kernels.Add, x, x, y)
		}
	})
}

// benchCrossEntropy times the loss and its gradient over [rows, cols] logits.
func benchCrossEntropy(b *testing.B, rows, cols int, grad bool) {
	r := rng(3)
	logits := testutil.RandFloat32s(r, rows*cols)
	labels := make([]int32, rows)
	for i := range labels {
		labels[i] = int32(r.IntN(cols))
	}
	loss, g, dst := make([]float32, rows), make([]float32, rows), make([]float32, rows*cols)
	kernels.Fill(g, 1)
	b.SetBytes(int64(4 * rows * cols))
	b.ResetTimer()
	for b.Loop() {
		if grad {
			kernels.SoftmaxCrossEntropyGrad(dst, logits, labels, g, rows, cols)
		} else {
			kernels.SoftmaxCrossEntropy(loss, logits, labels, rows, cols)
		}
	}
}

func BenchmarkSoftmaxCrossEntropy(b *testing.B) {
	b.Run("128x10", func(b *testing.B) { benchCrossEntropy(b, 128, 10, false) })
	b.Run("128x1000", func(b *testing.B) { benchCrossEntropy(b, 128, 1000, false) })
	b.Run("Grad/128x10", func(b *testing.B) { benchCrossEntropy(b, 128, 10, true) })
	b.Run("Grad/128x1000", func(b *testing.B) { benchCrossEntropy(b, 128, 1000, true) })
}

func BenchmarkReduceSumRows(b *testing.B) {
	x := testutil.RandFloat32s(rng(4), 128*1024)
	dst := make([]float32, 1024)
	shape := tensor.Shape{128, 1024}
	st := tensor.BroadcastStrides(tensor.Shape{1, 1024}, shape)
	b.SetBytes(4 * 128 * 1024)
	for b.Loop() {
		kernels.ReduceSum(dst, x, shape, st)
	}
}

func BenchmarkTranspose(b *testing.B) {
	x := testutil.RandFloat32s(rng(5), 1024*1024)
	dst := make([]float32, len(x))
	b.SetBytes(4 * 1024 * 1024)
	for b.Loop() {
		kernels.Transpose(dst, x, []int{1024, 1024}, []int{1, 0})
	}
}
