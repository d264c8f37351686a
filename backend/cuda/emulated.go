package cuda

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync"
	"unsafe"

	"github.com/headroom-ml/headroom/backend/cuda/ptx/interp"
	"github.com/headroom-ml/headroom/kernels"
	"github.com/headroom-ml/headroom/tensor"
)

// An emulated GPU: the driver API and cuBLAS written in Go over host
// memory, with the semantics their documentation gives, and kernel
// launches run by the PTX interpreter (package ptx/interp) on the exact
// text a GPU's driver would JIT-compile. Everything above the libraries
// runs on it unchanged: the mem.Device contract, OOM errors, bounds
// checks, the row-major to column-major GEMM mapping, and whole training
// runs of the backend (slowly: the interpreter runs a few hundred million
// instructions a second at best). The real libraries are only reached
// through load_cuda.go, which the GPU tests (-tags cuda) exercise.

// NewEmulated returns the CUDA backend on an emulated GPU of total bytes
// of device memory (compute capability 9.0, a CUDA 12.8 driver): device
// addresses are not host pointers, each cuMemAlloc is charged to the
// free count rounded up to 2 MiB as the driver does, every kernel runs
// in the PTX interpreter (which fails a launch that reads or writes
// outside every allocation, or races in shared memory, as
// CUDA_ERROR_ILLEGAL_ADDRESS with the interpreter's message), products
// run on the host's float32 GEMM. Close releases it.
func NewEmulated(total int64) (*Target, error) {
	if total <= 0 {
		return nil, fmt.Errorf("cuda: an emulated GPU of %d bytes", total)
	}
	f := newEmuDriver(uint64(total))
	g, err := open(f, 0)
	if err != nil {
		return nil, err
	}
	t, err := onGPU(g, &emuBLAS{f: f})
	if err != nil {
		g.Close()
		return nil, err
	}
	t.rt.owned = true
	return t, nil
}

// emuDriver implements driver in Go over host memory (see NewEmulated).
type emuDriver struct {
	mu          sync.Mutex
	devices     int
	total       uint64 // device memory
	granularity uint64 // cuMemAlloc rounds each allocation up to it in the free count
	used        uint64
	next        uint64            // next device address
	allocs      map[uint64][]byte // live device allocations by address
	sizes       []uint64          // every cuMemAlloc size asked, in order
	memsets     int
	host        map[unsafe.Pointer][]byte // pinned allocations
	retained    int                       // primary context references
	current     uintptr                   // the current context (one for all threads here)
	streams     map[uintptr]bool
	failAlloc   result // when set, cuMemAlloc fails with it

	// kernels: modules of PTX text, decoded entries, launches run by the
	// PTX interpreter over the device memory
	modules       map[uintptr]*interp.Module
	functions     map[uintptr]*interp.Program
	launches      int
	lastLaunchErr error
}

const emuCtx = 0xc0ffee

func newEmuDriver(total uint64) *emuDriver {
	return &emuDriver{devices: 1, total: total, granularity: 2 << 20, next: 1 << 40,
		allocs: map[uint64][]byte{}, host: map[unsafe.Pointer][]byte{}, streams: map[uintptr]bool{},
		modules: map[uintptr]*interp.Module{}, functions: map[uintptr]*interp.Program{}}
}

func (f *emuDriver) lock() func() { f.mu.Lock(); return f.mu.Unlock }

// ready is the check the driver makes on calls that need a context.
func (f *emuDriver) ready() result {
	if f.current != emuCtx || f.retained == 0 {
		return 201 // CUDA_ERROR_INVALID_CONTEXT
	}
	return cudaSuccess
}

// span returns the bytes [p, p+n) of one live allocation, or nil.
func (f *emuDriver) span(p, n uint64) []byte {
	for base, b := range f.allocs {
		if p >= base && p-base+n <= uint64(len(b)) {
			return b[p-base : p-base+n]
		}
	}
	return nil
}

func (f *emuDriver) Init() result                    { return cudaSuccess }
func (f *emuDriver) DriverGetVersion() (int, result) { return 12080, cudaSuccess }
func (f *emuDriver) DeviceGetCount() (int, result)   { return f.devices, cudaSuccess }
func (f *emuDriver) DeviceGet(o int) (int32, result) {
	if o < 0 || o >= f.devices {
		return 0, cudaErrorInvalidDev
	}
	return int32(o), cudaSuccess
}
func (f *emuDriver) DeviceGetName(dev int32) (string, result) {
	return "emulated GPU (PTX interpreter)", cudaSuccess
}
func (f *emuDriver) DeviceGetAttribute(attr, dev int32) (int, result) {
	switch attr {
	case attrComputeCapabilityMajor:
		return 9, cudaSuccess
	case attrComputeCapabilityMinor:
		return 0, cudaSuccess
	}
	return 0, cudaErrorInvalidVal
}
func (f *emuDriver) DevicePrimaryCtxRetain(dev int32) (uintptr, result) {
	defer f.lock()()
	f.retained++
	return emuCtx, cudaSuccess
}
func (f *emuDriver) DevicePrimaryCtxRelease(dev int32) result {
	defer f.lock()()
	f.retained--
	return cudaSuccess
}
func (f *emuDriver) CtxSetCurrent(ctx uintptr) result {
	defer f.lock()()
	f.current = ctx
	return cudaSuccess
}
func (f *emuDriver) CtxSynchronize() result { defer f.lock()(); return f.ready() }
func (f *emuDriver) MemGetInfo() (uint64, uint64, result) {
	defer f.lock()()
	return f.total - f.used, f.total, f.ready()
}
func (f *emuDriver) MemAlloc(n uint64) (uint64, result) {
	defer f.lock()()
	if r := f.ready(); r != cudaSuccess {
		return 0, r
	}
	f.sizes = append(f.sizes, n)
	if f.failAlloc != cudaSuccess {
		return 0, f.failAlloc
	}
	rounded := (n + f.granularity - 1) / f.granularity * f.granularity
	if n == 0 {
		return 0, cudaErrorInvalidVal
	}
	if f.used+rounded > f.total {
		return 0, cudaErrorOutOfMemory
	}
	p := f.next
	f.next += rounded
	f.used += rounded
	f.allocs[p] = make([]byte, n)
	return p, cudaSuccess
}
func (f *emuDriver) MemFree(p uint64) result {
	defer f.lock()()
	b, ok := f.allocs[p]
	if !ok {
		return cudaErrorInvalidVal
	}
	f.used -= (uint64(len(b)) + f.granularity - 1) / f.granularity * f.granularity
	delete(f.allocs, p)
	return f.ready()
}
func (f *emuDriver) MemsetD8(p uint64, v byte, n uint64) result {
	defer f.lock()()
	s := f.span(p, n)
	if s == nil {
		return cudaErrorInvalidVal
	}
	f.memsets++
	for i := range s {
		s[i] = v
	}
	return f.ready()
}
func hostBytes(p unsafe.Pointer, n uint64) []byte { return unsafe.Slice((*byte)(p), n) }
func (f *emuDriver) MemcpyHtoD(dst uint64, src unsafe.Pointer, n uint64) result {
	defer f.lock()()
	s := f.span(dst, n)
	if s == nil {
		return cudaErrorInvalidVal
	}
	copy(s, hostBytes(src, n))
	return f.ready()
}
func (f *emuDriver) MemcpyDtoH(dst unsafe.Pointer, src, n uint64) result {
	defer f.lock()()
	s := f.span(src, n)
	if s == nil {
		return cudaErrorInvalidVal
	}
	copy(hostBytes(dst, n), s)
	return f.ready()
}
func (f *emuDriver) MemcpyDtoD(dst, src, n uint64) result {
	defer f.lock()()
	d, s := f.span(dst, n), f.span(src, n)
	if d == nil || s == nil {
		return cudaErrorInvalidVal
	}
	copy(d, s)
	return f.ready()
}
func (f *emuDriver) MemcpyHtoDAsync(dst uint64, src unsafe.Pointer, n uint64, s uintptr) result {
	if !f.streamOK(s) {
		return cudaErrorInvalidVal
	}
	return f.MemcpyHtoD(dst, src, n)
}
func (f *emuDriver) MemcpyDtoHAsync(dst unsafe.Pointer, src, n uint64, s uintptr) result {
	if !f.streamOK(s) {
		return cudaErrorInvalidVal
	}
	return f.MemcpyDtoH(dst, src, n)
}
func (f *emuDriver) streamOK(s uintptr) bool { defer f.lock()(); return f.streams[s] }
func (f *emuDriver) MemHostAlloc(n uint64) (unsafe.Pointer, result) {
	defer f.lock()()
	// page-aligned, as cuMemHostAlloc's memory is
	b := make([]byte, n+4096)
	off := (4096 - uintptr(unsafe.Pointer(&b[0]))%4096) % 4096
	b = b[off : off+uintptr(n)]
	p := unsafe.Pointer(&b[0])
	f.host[p] = b
	return p, f.ready()
}
func (f *emuDriver) MemFreeHost(p unsafe.Pointer) result {
	defer f.lock()()
	if _, ok := f.host[p]; !ok {
		return cudaErrorInvalidVal
	}
	delete(f.host, p)
	return f.ready()
}
func (f *emuDriver) StreamCreate() (uintptr, result) {
	defer f.lock()()
	h := uintptr(len(f.streams) + 1)
	f.streams[h] = true
	return h, f.ready()
}
func (f *emuDriver) StreamDestroy(s uintptr) result {
	defer f.lock()()
	if !f.streams[s] {
		return cudaErrorInvalidVal
	}
	delete(f.streams, s)
	return f.ready()
}
func (f *emuDriver) StreamSynchronize(s uintptr) result {
	defer f.lock()()
	if !f.streams[s] {
		return cudaErrorInvalidVal
	}
	return f.ready()
}
func (f *emuDriver) GetErrorName(r result) string {
	switch r {
	case cudaErrorInvalidVal:
		return "CUDA_ERROR_INVALID_VALUE"
	case cudaErrorOutOfMemory:
		return "CUDA_ERROR_OUT_OF_MEMORY"
	case 201:
		return "CUDA_ERROR_INVALID_CONTEXT"
	case 700:
		return "CUDA_ERROR_ILLEGAL_ADDRESS"
	}
	return fmt.Sprintf("CUresult %d", r)
}
func (f *emuDriver) GetErrorString(r result) string {
	if r == cudaErrorOutOfMemory {
		return "out of memory"
	}
	if r == 700 && f.lastLaunchErr != nil {
		return f.lastLaunchErr.Error()
	}
	return ""
}

func (f *emuDriver) ModuleLoadData(ptx string) (uintptr, result) {
	defer f.lock()()
	if r := f.ready(); r != cudaSuccess {
		return 0, r
	}
	m, err := interp.Parse(ptx)
	if err != nil {
		return 0, 218 // CUDA_ERROR_INVALID_PTX
	}
	h := uintptr(len(f.modules) + len(f.functions) + 1)
	f.modules[h] = m
	return h, cudaSuccess
}
func (f *emuDriver) ModuleUnload(m uintptr) result {
	defer f.lock()()
	if f.modules[m] == nil {
		return 400 // CUDA_ERROR_INVALID_HANDLE
	}
	delete(f.modules, m)
	return f.ready()
}
func (f *emuDriver) ModuleGetFunction(m uintptr, name string) (uintptr, result) {
	defer f.lock()()
	mod := f.modules[m]
	if mod == nil {
		return 0, 400
	}
	p, err := interp.Decode(mod, name)
	if err != nil {
		return 0, 500 // CUDA_ERROR_NOT_FOUND
	}
	h := uintptr(1<<20 + len(f.functions))
	f.functions[h] = p
	return h, f.ready()
}

// LaunchKernel runs the launch in the PTX interpreter over every live
// device allocation (an access outside all of them is the launch's
// failure, as an illegal address is on a GPU; the interpreter's error is
// kept in lastLaunchErr).
func (f *emuDriver) LaunchKernel(fn uintptr, a *launchArgs, stream uintptr) result {
	defer f.lock()()
	p := f.functions[fn]
	if p == nil || !f.streams[stream] || a.Grid[1] != 1 || a.Grid[2] != 1 || a.Block[1] != 1 || a.Block[2] != 1 {
		return cudaErrorInvalidVal
	}
	args := make([]uint64, len(a.Params))
	for i, ptr := range a.Params {
		args[i] = *(*uint64)(ptr)
	}
	bufs := make([]interp.Buffer, 0, len(f.allocs))
	for base, b := range f.allocs {
		bufs = append(bufs, interp.Buffer{Name: fmt.Sprintf("allocation at %#x", base), Addr: base, Data: b})
	}
	f.launches++
	if err := p.Run(interp.Launch{Grid: int(a.Grid[0]), Block: int(a.Block[0]), Args: args, Buffers: bufs}); err != nil {
		f.lastLaunchErr = err
		return 700 // CUDA_ERROR_ILLEGAL_ADDRESS
	}
	return f.ready()
}

// emuBLAS implements blas on an emuDriver's memory: GEMM as the cuBLAS
// documentation defines it, column-major, C = alpha·op(A)·op(B) + beta·C
// (C is not read when beta is 0), with its checks on the leading
// dimensions. It sums in float64.
type emuBLAS struct {
	f         *emuDriver
	handles   int
	workspace [2]uint64 // address, size
	calls     int
}

func (b *emuBLAS) Create() (uintptr, blasStatus) {
	b.handles++
	return uintptr(b.handles), blasSuccess
}
func (b *emuBLAS) Destroy(h uintptr) blasStatus { b.handles--; return blasSuccess }
func (b *emuBLAS) GetVersion(h uintptr) (int, blasStatus) {
	return 120903, blasSuccess
}
func (b *emuBLAS) SetStream(h, s uintptr) blasStatus {
	if !b.f.streamOK(s) {
		return 7
	}
	return blasSuccess
}
func (b *emuBLAS) SetWorkspace(h uintptr, p, n uint64) blasStatus {
	defer b.f.lock()()
	if p%256 != 0 || b.f.span(p, n) == nil {
		return 7 // CUBLAS_STATUS_INVALID_VALUE
	}
	b.workspace = [2]uint64{p, n}
	return blasSuccess
}
func (b *emuBLAS) Sgemm(h uintptr, g *gemmArgs) blasStatus {
	if g.AType != dataR32F || g.BType != dataR32F {
		return 7
	}
	return b.gemm(g)
}
func (b *emuBLAS) GemmEx(h uintptr, g *gemmArgs) blasStatus { return b.gemm(g) }
func (b *emuBLAS) StatusName(s blasStatus) string           { return statusName(s) }

// rowMajor computes a product with tight leading dimensions, alpha 1 and
// beta 0 or 1 (every product BLAS.MatMul makes) as the row-major product
// it stands for, with the host's float32 GEMM (kernels.MatMul): the
// column-major C [M, N] is the row-major Cᵀ [N, M] = op(B)ᵀ·op(A)ᵀ, each
// operand's bytes the row-major transpose of its column-major matrix. It
// reports false (computing nothing) for any other product.
func (b *emuBLAS) rowMajor(g *gemmArgs, rowsA, colsA, rowsB, colsB int) bool {
	if *g.Alpha != 1 || (*g.Beta != 0 && *g.Beta != 1) || int(g.LDA) != rowsA || int(g.LDB) != rowsB || int(g.LDC) != int(g.M) {
		return false
	}
	M, N, K := int(g.M), int(g.N), int(g.K)
	operand := func(p uint64, typ int32, n int) []float32 {
		es := map[int32]int{dataR32F: 4, dataR16F: 2, dataR16BF: 2}[typ]
		s := b.f.span(p, uint64(n*es))
		if s == nil {
			return nil
		}
		if typ == dataR32F {
			return tensor.As[float32](s)
		}
		out := make([]float32, n)
		for i := range out {
			h := binary.LittleEndian.Uint16(s[2*i:])
			if typ == dataR16F {
				out[i] = tensor.F16(h).Float32()
			} else {
				out[i] = tensor.BF16(h).Float32()
			}
		}
		return out
	}
	A, B := operand(g.A, g.AType, rowsA*colsA), operand(g.B, g.BType, rowsB*colsB)
	c := b.f.span(g.C, uint64(M*N*4))
	if A == nil || B == nil || c == nil {
		return false
	}
	// row-major: Cᵀ [N, M] = B' [N, K] · A' [K, M], B' the stored B (row
	// major [colsB, rowsB]) transposed when TransB is N ... as BLAS.gemm
	// mapped it
	kernels.MatMul(tensor.As[float32](c), B, A, N, M, K, g.TransB == blasOpT, g.TransA == blasOpT, *g.Beta == 1)
	return true
}

func (b *emuBLAS) gemm(g *gemmArgs) blasStatus {
	defer b.f.lock()()
	b.calls++
	M, N, K := int(g.M), int(g.N), int(g.K)
	rowsA, rowsB := M, K // rows of A and B as stored
	if g.TransA == blasOpT {
		rowsA = K
	}
	if g.TransB == blasOpT {
		rowsB = N
	}
	if M < 0 || N < 0 || K < 0 || int(g.LDA) < max(1, rowsA) || int(g.LDB) < max(1, rowsB) || int(g.LDC) < max(1, M) {
		return 7
	}
	colsA, colsB := K, N
	if g.TransA == blasOpT {
		colsA = M
	}
	if g.TransB == blasOpT {
		colsB = K
	}
	read := func(p uint64, typ int32, ld, rows, cols int) func(i, j int) float64 {
		es := map[int32]int{dataR32F: 4, dataR16F: 2, dataR16BF: 2}[typ]
		s := b.f.span(p, uint64(((cols-1)*ld+rows)*es))
		if s == nil {
			return nil
		}
		return func(i, j int) float64 {
			o := (i + j*ld) * es
			switch typ {
			case dataR16F:
				return float64(tensor.F16(binary.LittleEndian.Uint16(s[o:])).Float32())
			case dataR16BF:
				return float64(tensor.BF16(binary.LittleEndian.Uint16(s[o:])).Float32())
			}
			return float64(math.Float32frombits(binary.LittleEndian.Uint32(s[o:])))
		}
	}
	if M == 0 || N == 0 {
		return blasSuccess
	}
	if b.rowMajor(g, rowsA, colsA, rowsB, colsB) {
		return blasSuccess
	}
	A, B := read(g.A, g.AType, int(g.LDA), rowsA, colsA), read(g.B, g.BType, int(g.LDB), rowsB, colsB)
	c := b.f.span(g.C, uint64(((N-1)*int(g.LDC)+M)*4))
	if A == nil || B == nil || c == nil {
		return 14 // the kernel would fault on an illegal address; cuBLAS reports an internal error
	}
	alpha, beta := float64(*g.Alpha), float64(*g.Beta)
	for j := 0; j < N; j++ {
		for i := 0; i < M; i++ {
			var s float64
			for p := 0; p < K; p++ {
				a, bb := 0.0, 0.0
				if g.TransA == blasOpN {
					a = A(i, p)
				} else {
					a = A(p, i)
				}
				if g.TransB == blasOpN {
					bb = B(p, j)
				} else {
					bb = B(j, p)
				}
				s += a * bb
			}
			o := (i + j*int(g.LDC)) * 4
			v := alpha * s
			if beta != 0 {
				v += beta * float64(math.Float32frombits(binary.LittleEndian.Uint32(c[o:])))
			}
			binary.LittleEndian.PutUint32(c[o:], math.Float32bits(float32(v)))
		}
	}
	return blasSuccess
}
