package cuda

import (
	"fmt"
	"math"
	"sync"

	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/tensor"
)

// BLAS is a cuBLAS handle on one GPU. Its MatMul takes row-major operands,
// as package kernels does, and calls the column-major GEMM on the
// transposed problem: a row-major [r, c] array is the column-major [c, r]
// matrix of the same bytes, so dst = op(a)·op(b) row-major is
// dstᵀ = op(b)ᵀ·op(a)ᵀ column-major: cuBLAS gets b as its first operand,
// a as its second, and the sizes n, m, k.
//
// Calls on one BLAS are serialized; they are queued on its stream
// (SetStream; the default stream until then) and MatMul returns before the
// product is computed: synchronize the stream (or the GPU) before reading
// dst on the host.
type BLAS struct {
	g         *GPU
	lib       blas
	h         uintptr
	version   int
	workspace uint64 // the device workspace set by SetWorkspace; 0: cuBLAS's own

	mu        sync.Mutex
	args      gemmArgs // reused: a call allocates nothing
	one, zero float32
}

// NewBLAS loads cuBLAS (libcublas.so.13, .12 or .11) on first use and
// creates a handle on g (cublasCreate_v2). Until SetWorkspace is called,
// cuBLAS allocates its own workspace from the driver, outside the ledger.
// Close, or closing g, destroys the handle.
func (g *GPU) NewBLAS() (*BLAS, error) {
	lib, err := loadBLAS()
	if err != nil {
		return nil, err
	}
	return g.newBLAS(lib)
}

func (g *GPU) newBLAS(lib blas) (*BLAS, error) {
	if err := g.enter("cublasCreate_v2"); err != nil {
		return nil, err
	}
	defer g.leave()
	h, s := lib.Create()
	if err := blasError(lib, g.name, "cublasCreate_v2", s); err != nil {
		return nil, err
	}
	v, s := lib.GetVersion(h)
	if err := blasError(lib, g.name, "cublasGetVersion_v2", s); err != nil {
		lib.Destroy(h)
		return nil, err
	}
	b := &BLAS{g: g, lib: lib, h: h, version: v, one: 1}
	g.mu.Lock()
	g.blas = append(g.blas, b)
	g.mu.Unlock()
	return b, nil
}

// Version returns cuBLAS's version, e.g. 120903 for 12.9.3.
func (b *BLAS) Version() int { return b.version }

// BLASWorkspaceBytes is the size of the buffer to give SetWorkspace: the
// workspace NVIDIA recommends (32 MiB on Hopper, compute capability 9 and
// up; 4 MiB before; cuBLAS documentation of cublasSetWorkspace) plus 256
// bytes, so that a 256-byte aligned workspace of that size fits in a
// 64-byte aligned buffer.
func (g *GPU) BLASWorkspaceBytes() int64 {
	if g.cc[0] >= 9 {
		return 32<<20 + 256
	}
	return 4<<20 + 256
}

// SetWorkspace makes cuBLAS use the 256-byte aligned part of buf (a buffer
// on b's GPU, from an Allocator that charges the device ledger, category
// workspace) instead of memory it would take from the driver itself, so
// its workspace is on the ledger too. buf must stay allocated until b is
// closed or given another workspace.
func (b *BLAS) SetWorkspace(buf *mem.Buffer) error {
	return b.setWorkspaceAt(buf.Ptr(), uint64(buf.Size()))
}

// setWorkspaceAt is SetWorkspace on n bytes at device address p (the
// 256-byte aligned part of them).
func (b *BLAS) setWorkspaceAt(p uintptr, n uint64) error {
	start := (uint64(p) + 255) &^ 255
	end := uint64(p) + n
	if p == 0 || end <= start {
		return fmt.Errorf("cuda: cublasSetWorkspace_v2 on %s: a %d-byte buffer holds no 256-byte aligned workspace", b.g.name, n)
	}
	size := (end - start) &^ 255
	if err := b.g.check("cublasSetWorkspace_v2", uintptr(start), int64(size)); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.g.enter("cublasSetWorkspace_v2"); err != nil {
		return err
	}
	s := b.lib.SetWorkspace(b.h, start, size)
	b.g.leave()
	if err := blasError(b.lib, b.g.name, "cublasSetWorkspace_v2", s); err != nil {
		return err
	}
	b.workspace = start
	return nil
}

// SetStream queues b's later calls on s (cublasSetStream_v2).
func (b *BLAS) SetStream(s *Stream) error {
	if s == nil || s.g != b.g {
		return fmt.Errorf("cuda: cublasSetStream_v2 on %s: the stream is not one of this device", b.g.name)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.g.enter("cublasSetStream_v2"); err != nil {
		return err
	}
	st := b.lib.SetStream(b.h, s.h)
	b.g.leave()
	return blasError(b.lib, b.g.name, "cublasSetStream_v2", st)
}

// MatMul sets dst = op(a)·op(b), or adds it to dst when accumulate is set,
// in float32 on the GPU (cublasSgemm_v2), with the shapes and layout of
// kernels.MatMul:
//
//	dst:   [m, n] row-major, float32
//	op(a): [m, k]; a is stored [m, k] row-major, or [k, m] when transA
//	op(b): [k, n]; b is stored [k, n], or [n, k] when transB
//
// dst, a and bm are device addresses inside memory mapped by b's GPU; the
// operands must not overlap dst. It returns an error for a negative or too
// large size or an operand outside the GPU's mappings, and the cuBLAS
// status otherwise.
func (b *BLAS) MatMul(dst, a, bm uintptr, m, n, k int, transA, transB, accumulate bool) error {
	return b.gemm("cublasSgemm_v2", tensor.Float32, dst, a, bm, m, n, k, transA, transB, accumulate)
}

// MatMulEx is MatMul with a and bm of dtype in (Float32, Float16 or
// BFloat16) and dst float32: products and sums are float32 whatever in is
// (cublasGemmEx with CUBLAS_COMPUTE_32F), the mixed-precision GEMM. 16-bit
// operands need compute capability 8.0 or later for BFloat16, 5.3 for
// Float16.
func (b *BLAS) MatMulEx(in tensor.DType, dst, a, bm uintptr, m, n, k int, transA, transB, accumulate bool) error {
	switch in {
	case tensor.Float32, tensor.Float16, tensor.BFloat16:
	default:
		return fmt.Errorf("cuda: cublasGemmEx on %s: operands of %s (want float32, float16 or bfloat16)", b.g.name, in)
	}
	return b.gemm("cublasGemmEx", in, dst, a, bm, m, n, k, transA, transB, accumulate)
}

func (b *BLAS) gemm(op string, in tensor.DType, dst, a, bm uintptr, m, n, k int, transA, transB, accumulate bool) error {
	if m < 0 || n < 0 || k < 0 || m > math.MaxInt32 || n > math.MaxInt32 || k > math.MaxInt32 {
		return fmt.Errorf("cuda: %s on %s: sizes m=%d n=%d k=%d must be in [0, 2^31)", op, b.g.name, m, n, k)
	}
	es := int64(in.Size())
	for i, p := range [3]uintptr{dst, a, bm} {
		bytes := [3]int64{int64(m) * int64(n) * 4, int64(m) * int64(k) * es, int64(k) * int64(n) * es}[i]
		if bytes > 0 && !b.g.inside(p, bytes) {
			return fmt.Errorf("cuda: %s on %s: operand %s (%d bytes at %#x) is not inside memory mapped by this device", op, b.g.name, [3]string{"dst", "a", "b"}[i], bytes, p)
		}
	}
	if m == 0 || n == 0 {
		return nil
	}
	if k == 0 { // an empty sum: dst = 0, or unchanged when accumulating
		if accumulate {
			return nil
		}
		if err := b.g.enter("cuMemsetD8_v2"); err != nil {
			return err
		}
		r := b.g.drv.MemsetD8(uint64(dst), 0, uint64(m)*uint64(n)*4)
		b.g.leave()
		return driverError(b.g.drv, b.g.name, "cuMemsetD8_v2", r)
	}

	b.mu.Lock()
	defer b.mu.Unlock()
	// Column-major: dstᵀ [n, m] (ld n) = op(b)ᵀ [n, k] · op(a)ᵀ [k, m].
	// b stored [k, n] row-major is column-major [n, k] (ld n) = op(b)ᵀ:
	// no transpose; stored [n, k] it is column-major [k, n] (ld k) = op(b):
	// transpose. Likewise a: [m, k] is column-major [k, m] (ld k) = op(a)ᵀ;
	// [k, m] is column-major [m, k] (ld m) = op(a).
	g := &b.args
	*g = gemmArgs{M: int32(n), N: int32(m), K: int32(k), Alpha: &b.one, Beta: &b.zero,
		TransA: blasOpN, A: uint64(bm), LDA: int32(n),
		TransB: blasOpN, B: uint64(a), LDB: int32(k),
		C: uint64(dst), LDC: int32(n)}
	if accumulate {
		g.Beta = &b.one
	}
	if transB {
		g.TransA, g.LDA = blasOpT, int32(k)
	}
	if transA {
		g.TransB, g.LDB = blasOpT, int32(m)
	}
	switch in {
	case tensor.Float16:
		g.AType, g.BType = dataR16F, dataR16F
	case tensor.BFloat16:
		g.AType, g.BType = dataR16BF, dataR16BF
	default:
		g.AType, g.BType = dataR32F, dataR32F
	}
	if err := b.g.enter(op); err != nil {
		return err
	}
	var s blasStatus
	if op == "cublasSgemm_v2" {
		s = b.lib.Sgemm(b.h, g)
	} else {
		s = b.lib.GemmEx(b.h, g)
	}
	b.g.leave()
	return blasError(b.lib, b.g.name, op, s)
}

// Close destroys the handle (cublasDestroy_v2).
func (b *BLAS) Close() error {
	g := b.g
	g.mu.Lock()
	defer g.mu.Unlock()
	for i, x := range g.blas {
		if x == b {
			g.blas = append(g.blas[:i], g.blas[i+1:]...)
			return b.destroy()
		}
	}
	return nil // closed already, or by GPU.Close
}

func (b *BLAS) destroy() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.g.enter("cublasDestroy_v2"); err != nil {
		return err
	}
	s := b.lib.Destroy(b.h)
	b.g.leave()
	return blasError(b.lib, b.g.name, "cublasDestroy_v2", s)
}
