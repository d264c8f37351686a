package kernels_test

import (
	"testing"

	"github.com/headroom-ml/headroom/internal/testutil"
	"github.com/headroom-ml/headroom/kernels"
)

// BenchmarkCNN times the convolution, pooling and bias-gradient kernels of
// the reference CNN (nn.ModelByName "cnn") at batch 128, with the workspace
// the compiler plans (compile.ConvWorkspaceLimit, 8 MiB), one kernel per
// sub-benchmark, reporting GFLOP/s for the products (2 flops per
// multiply-add).
func BenchmarkCNN(b *testing.B) {
	const n = 128
	const workBytes = 8 << 20
	r := rng(6)
	g1 := kernels.NewConvGeom(n, 28, 28, 1, 3, 3, 1, 1, false)
	g2 := kernels.NewConvGeom(n, 26, 26, 32, 3, 3, 1, 1, false)
	gp := kernels.NewConvGeom(n, 24, 24, 64, 2, 2, 2, 2, false)
	x0 := testutil.RandFloat32s(r, n*28*28)
	f1, f2 := testutil.RandFloat32s(r, 9*32), testutil.RandFloat32s(r, 9*32*64)
	y1, y2 := testutil.RandFloat32s(r, n*26*26*32), testutil.RandFloat32s(r, n*24*24*64)
	p := testutil.RandFloat32s(r, n*12*12*64)
	dy2 := testutil.RandFloat32s(r, len(y2))
	work := make([]float32, workBytes/4)
	df1, df2 := make([]float32, len(f1)), make([]float32, len(f2))
	dx1 := make([]float32, len(y1))
	dx2 := make([]float32, len(y2))
	for _, c := range []struct {
		name  string
		flops float64
		run   func()
	}{
		{"conv1", 2 * n * 26 * 26 * 32 * 9, func() { kernels.Conv2D(y1, x0, f1, work, g1, 32) }},
		{"conv2", 2 * n * 24 * 24 * 64 * 288, func() { kernels.Conv2D(y2, y1, f2, work, g2, 64) }},
		{"maxpool", 0, func() { kernels.MaxPool2D(p, y2, gp) }},
		{"maxpoolgrad", 0, func() { kernels.MaxPool2DGrad(dx2, y2, p, gp) }},
		{"relugrad2", 0, func() { kernels.ReluGrad(dx2, dy2, y2) }},
		{"sumrows2", 0, func() { kernels.SumRows(df2[:64], dy2, n*24*24, 64) }},
		{"conv2dx", 2 * n * 24 * 24 * 64 * 288, func() { kernels.Conv2DBackpropInput(dx1, dy2, f2, work, g2, 64) }},
		{"conv2df", 2 * n * 24 * 24 * 64 * 288, func() { kernels.Conv2DBackpropFilter(df2, y1, dy2, work, g2, 64) }},
		{"conv1df", 2 * n * 26 * 26 * 32 * 9, func() { kernels.Conv2DBackpropFilter(df1, x0, dx1, work, g1, 32) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				c.run()
			}
			if c.flops > 0 {
				b.ReportMetric(c.flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			}
		})
	}
}
