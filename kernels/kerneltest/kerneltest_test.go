package kerneltest_test

import (
	"math"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/headroom-ml/headroom/kernels"
	"github.com/headroom-ml/headroom/kernels/kerneltest"
	"github.com/headroom-ml/headroom/tensor"
)

type tensor16 = tensor.BF16

// brokenEnv names the mutation TestBrokenImpl runs in a child process.
const brokenEnv = "KERNELTEST_BROKEN"

// mutations are deliberately wrong implementations; the suite must reject
// each one, naming the kernel.
var mutations = map[string]func(impl *kerneltest.Impl){
	"Exp off by 1e-4": func(impl *kerneltest.Impl) {
		impl.Exp = func(dst, x []float32) []float32 {
			kernels.Exp(dst, x)
			for i := range dst {
				dst[i] *= 1 + 1e-4
			}
			return dst
		}
	},
	"MatMul ignores transB": func(impl *kerneltest.Impl) {
		impl.MatMul = func(dst, a, b []float32, m, n, k int, ta, tb, acc bool) []float32 {
			return kernels.MatMul(dst, a, b, m, n, k, ta, false, acc)
		}
	},
	"MatMul ignores accumulate": func(impl *kerneltest.Impl) {
		impl.MatMul = func(dst, a, b []float32, m, n, k int, ta, tb, acc bool) []float32 {
			return kernels.MatMul(dst, a, b, m, n, k, ta, tb, false)
		}
	},
	"Softmax without the row max": func(impl *kerneltest.Impl) {
		impl.Softmax = func(dst, x []float32, rows, cols int) []float32 {
			for r := 0; r < rows; r++ {
				var s float32
				for c := 0; c < cols; c++ {
					dst[r*cols+c] = float32(math.Exp(float64(x[r*cols+c])))
					s += dst[r*cols+c]
				}
				for c := 0; c < cols; c++ {
					dst[r*cols+c] /= s
				}
			}
			return dst
		}
	},
	"ReduceSum drops the last element": func(impl *kerneltest.Impl) {
		impl.ReduceSum = func(dst, x []float32, shape, st []int) []float32 {
			y := append([]float32(nil), x...)
			if len(y) > 1 {
				y[len(y)-1] = 0
			}
			return kernels.ReduceSum(dst, y, shape, st)
		}
	},
	"BinaryBroadcast repeats the first row of b": func(impl *kerneltest.Impl) {
		impl.BinaryBroadcast = func(op kernels.BinaryOp, dst, a, b []float32, shape, as, bs []int) []float32 {
			bs2 := append([]int(nil), bs...)
			if len(bs2) > 1 {
				bs2[0] = 0
			}
			return kernels.BinaryBroadcast(op, dst, a, b, shape, as, bs2)
		}
	},
	"Binary Max drops NaN": func(impl *kerneltest.Impl) {
		impl.Binary = func(op kernels.BinaryOp, dst, a, b []float32) []float32 {
			kernels.Binary(op, dst, a, b)
			if op == kernels.Max {
				for i := range dst {
					if dst[i] != dst[i] {
						dst[i] = 0
					}
				}
			}
			return dst
		}
	},
	"SoftmaxCrossEntropy reports the last bad row": func(impl *kerneltest.Impl) {
		impl.SoftmaxCrossEntropy = func(loss, logits []float32, labels []int32, rows, cols int) int {
			bad := kernels.SoftmaxCrossEntropy(loss, logits, labels, rows, cols)
			for r, l := range labels {
				if l < 0 || int(l) >= cols {
					bad = r
				}
			}
			return bad
		}
	},
	"AttentionForward ignores causal": func(impl *kerneltest.Impl) {
		impl.AttentionForward = func(o, lse, q, k, v []float32, p kernels.AttentionParams, work []float32) []float32 {
			p.Causal = false
			return kernels.AttentionForward(o, lse, q, k, v, p, work)
		}
	},
	"AttentionBackward ignores dropout": func(impl *kerneltest.Impl) {
		impl.AttentionBackward = func(dq, dk, dv, do, o, lse, q, k, v []float32, p kernels.AttentionParams, work []float32) []float32 {
			p.DropoutRate = 0
			return kernels.AttentionBackward(dq, dk, dv, do, o, lse, q, k, v, p, work)
		}
	},
	"Transpose ignores perm": func(impl *kerneltest.Impl) {
		impl.Transpose = func(dst, x []float32, shape, perm []int) []float32 { return kernels.Copy(dst, x) }
	},
	"Float32ToBF16 truncates": func(impl *kerneltest.Impl) {
		impl.Float32ToBF16 = func(dst []tensor16, src []float32) []tensor16 {
			for i, v := range src {
				dst[i] = tensor16(math.Float32bits(v) >> 16)
			}
			return dst
		}
	},
	"Relu allocates": func(impl *kerneltest.Impl) {
		impl.Relu = func(dst, x []float32) []float32 {
			tmp := make([]float32, len(x))
			kernels.Relu(tmp, x)
			copy(dst, tmp)
			sink = tmp
			return dst
		}
	},
	"Neg returns a new slice": func(impl *kerneltest.Impl) {
		impl.Neg = func(dst, x []float32) []float32 {
			kernels.Neg(dst, x)
			return append([]float32(nil), dst...)
		}
	},
	"SigmoidGrad writes its input": func(impl *kerneltest.Impl) {
		impl.SigmoidGrad = func(dst, y, g []float32) []float32 {
			kernels.SigmoidGrad(dst, y, g)
			if len(y) > 0 && &y[0] != &dst[0] && &g[0] != &dst[0] {
				y[0]++
			}
			return dst
		}
	},
}

var sink []float32

// TestBrokenImpl is the child half of TestSuiteRejectsBrokenKernels: it runs
// the suite on a single mutation and is expected to fail.
func TestBrokenImpl(t *testing.T) {
	m := os.Getenv(brokenEnv)
	if m == "" {
		return // only meaningful as a child process
	}
	impl := kerneltest.Impl{Name: "broken"}
	mutation, ok := mutations[m]
	if !ok {
		mutation = windowMutations[m]
	}
	mutation(&impl)
	kerneltest.Run(t, impl)
}

func TestSuiteRejectsBrokenKernels(t *testing.T) {
	if os.Getenv(brokenEnv) != "" {
		return
	}
	var names []string
	for m := range mutations {
		names = append(names, m)
	}
	for m := range windowMutations {
		names = append(names, m)
	}
	for _, m := range names {
		t.Run(m, func(t *testing.T) {
			t.Parallel()
			// The child's Impl holds only the broken kernel, and the suite
			// must reject it in that kernel's subtest (in Allocs for a
			// kernel that allocates).
			kernel, _, _ := strings.Cut(m, " ")
			sub := kernel
			if strings.Contains(m, " allocates") {
				sub = "Allocs"
			}
			cmd := exec.Command(os.Args[0], "-test.run=^TestBrokenImpl$", "-test.count=1")
			cmd.Env = append(os.Environ(), brokenEnv+"="+m)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the suite passed a broken %s (%s)", kernel, m)
			}
			if !strings.Contains(string(out), "--- FAIL: TestBrokenImpl/"+sub+" ") {
				t.Errorf("the suite failed, but not in %s:\n%s", sub, out)
			}
		})
	}
}

func TestReferencePasses(t *testing.T) {
	kerneltest.Run(t, kerneltest.Reference())
}

// TestSuiteAcceptsReorderedSums checks the other side of the closeness
// rules: implementations that sum in another order, in float32 throughout,
// pass. A suite that only a bit-identical copy of the reference could pass
// would be useless for fast versions.
func TestSuiteAcceptsReorderedSums(t *testing.T) {
	toBF16 := func(v float32) float32 { return tensor.ToBFloat16(v).Float32() }
	impl := kerneltest.Impl{
		Name:       "reordered",
		MatMul:     backwardsMatMul(func(v float32) float32 { return v }),
		MatMulBF16: backwardsMatMul(toBF16),
		SumRows: func(dst, x []float32, rows, cols int) []float32 {
			for c := range dst {
				var s float32
				for r := rows - 1; r >= 0; r-- {
					s += x[r*cols+c]
				}
				dst[c] = s
			}
			return dst
		},
		Exp: func(dst, x []float32) []float32 {
			for i, v := range x { // exp as e^(v/2) squared: a few ulps off
				h := float32(math.Exp(float64(v / 2)))
				dst[i] = h * h
			}
			return dst
		},
		Conv2DBackpropFilter:     backwardsConvFilter(func(v float32) float32 { return v }),
		Conv2DBackpropFilterBF16: backwardsConvFilter(toBF16),
	}
	kerneltest.Run(t, impl)
}

// backwardsMatMul returns MatMul with its operands read through round and
// each sum taken backwards in one float32 accumulator.
func backwardsMatMul(round func(float32) float32) kerneltest.MatMulFunc {
	return func(dst, a, b []float32, m, n, k int, ta, tb, acc bool) []float32 {
		for i := 0; i < m; i++ {
			for j := 0; j < n; j++ {
				var s float32
				for p := k - 1; p >= 0; p-- {
					av, bv := a[i*k+p], b[p*n+j]
					if ta {
						av = a[p*m+i]
					}
					if tb {
						bv = b[j*k+p]
					}
					s += round(av) * round(bv)
				}
				if acc {
					s += dst[i*n+j]
				}
				dst[i*n+j] = s
			}
		}
		return dst
	}
}

// backwardsConvFilter returns Conv2DBackpropFilter with its operands read
// through round and each sum, over the images and output positions, taken
// backwards in one float32 accumulator.
func backwardsConvFilter(round func(float32) float32) kerneltest.ConvFunc {
	return func(dw, x, dy, work []float32, g kernels.ConvGeom, f int) []float32 {
		for kh := 0; kh < g.KH; kh++ {
			for kw := 0; kw < g.KW; kw++ {
				for c := 0; c < g.C; c++ {
					for o := 0; o < f; o++ {
						var s float32
						for n := g.N - 1; n >= 0; n-- {
							for oh := g.OH - 1; oh >= 0; oh-- {
								for ow := g.OW - 1; ow >= 0; ow-- {
									ih, iw := oh*g.SH-g.PadTop+kh, ow*g.SW-g.PadLeft+kw
									if ih < 0 || ih >= g.H || iw < 0 || iw >= g.W {
										continue
									}
									s += round(x[((n*g.H+ih)*g.W+iw)*g.C+c]) * round(dy[((n*g.OH+oh)*g.OW+ow)*f+o])
								}
							}
						}
						dw[((kh*g.KW+kw)*g.C+c)*f+o] = s
					}
				}
			}
		}
		return dw
	}
}
