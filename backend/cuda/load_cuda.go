//go:build cuda

package cuda

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// Built with the tag cuda: the driver API and cuBLAS are loaded at run time
// with purego (dlopen and dlsym, no cgo), on first use. Every call goes
// through purego.SyscallN with integer and pointer arguments only (float
// scalars such as GEMM's alpha and beta are passed by pointer), which
// allocates nothing.

// Built reports whether this binary was built with -tags cuda.
const Built = true

// Library names, most recent first. The driver is libcuda.so.1 on every
// Linux distribution; cuBLAS's soname carries its major version. A pip
// install of PyTorch keeps cuBLAS under site-packages/nvidia/cublas/lib:
// add that directory to LD_LIBRARY_PATH.
var (
	driverLibs = []string{"libcuda.so.1", "libcuda.so"}
	blasLibs   = []string{
		"libcublas.so.13", "libcublas.so.12", "libcublas.so.11",
		"/usr/local/cuda/lib64/libcublas.so.13", "/usr/local/cuda/lib64/libcublas.so.12", "/usr/local/cuda/lib64/libcublas.so.11",
	}
)

var (
	driverOnce sync.Once
	theDriver  *libcuda
	driverErr  error

	blasOnce sync.Once
	theBLAS  *libcublas
	blasErr  error
)

func loadDriver() (driver, error) {
	driverOnce.Do(func() { theDriver, driverErr = openLibcuda() })
	if driverErr != nil {
		return nil, driverErr
	}
	return theDriver, nil
}

func loadBLAS() (blas, error) {
	blasOnce.Do(func() { theBLAS, blasErr = openLibcublas() })
	if blasErr != nil {
		return nil, blasErr
	}
	return theBLAS, nil
}

// dlopenFirst opens the first library of names that loads.
func dlopenFirst(what string, names []string, hint string) (uintptr, string, error) {
	var why []string
	for _, n := range names {
		h, err := purego.Dlopen(n, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err == nil {
			return h, n, nil
		}
		why = append(why, err.Error())
	}
	return 0, "", fmt.Errorf("cuda: cannot load %s (tried %s): %s; %s", what, strings.Join(names, ", "), strings.Join(why, "; "), hint)
}

// symbol is one entry point to resolve: the first of names that the
// library has; optional ones may be missing (their address stays 0).
type symbol struct {
	addr     *uintptr
	names    []string
	optional bool
}

func resolve(lib string, h uintptr, syms []symbol) error {
	for _, s := range syms {
		for _, n := range s.names {
			if p, err := purego.Dlsym(h, n); err == nil && p != 0 {
				*s.addr = p
				break
			}
		}
		if *s.addr == 0 && !s.optional {
			return fmt.Errorf("cuda: %s has no %s: the library is too old (CUDA 11 or later is needed)", lib, s.names[0])
		}
	}
	return nil
}

// cString copies a NUL-terminated C string.
func cString(p *byte) string {
	if p == nil {
		return ""
	}
	n := 0
	for *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return string(unsafe.Slice(p, n))
}

// libcuda is the driver API of libcuda.so.1: each field is the address of
// the entry point of the same name.
type libcuda struct {
	cuInit, cuDriverGetVersion, cuDeviceGetCount, cuDeviceGet, cuDeviceGetName, cuDeviceGetAttribute uintptr
	cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRelease, cuCtxSetCurrent, cuCtxSynchronize           uintptr
	cuMemGetInfo, cuMemAlloc, cuMemFree, cuMemsetD8                                                  uintptr
	cuMemcpyHtoD, cuMemcpyDtoH, cuMemcpyDtoD, cuMemcpyHtoDAsync, cuMemcpyDtoHAsync                   uintptr
	cuMemHostAlloc, cuMemFreeHost, cuStreamCreate, cuStreamDestroy, cuStreamSynchronize              uintptr
	cuGetErrorName, cuGetErrorString                                                                 uintptr
	cuModuleLoadData, cuModuleUnload, cuModuleGetFunction, cuLaunchKernel                            uintptr
}

func openLibcuda() (*libcuda, error) {
	h, name, err := dlopenFirst("the NVIDIA driver library", driverLibs,
		"is an NVIDIA driver installed (does nvidia-smi work)? In a container, the GPU and its driver must be passed through")
	if err != nil {
		return nil, err
	}
	l := &libcuda{}
	err = resolve(name, h, []symbol{
		{addr: &l.cuInit, names: []string{"cuInit"}},
		{addr: &l.cuDriverGetVersion, names: []string{"cuDriverGetVersion"}},
		{addr: &l.cuDeviceGetCount, names: []string{"cuDeviceGetCount"}},
		{addr: &l.cuDeviceGet, names: []string{"cuDeviceGet"}},
		{addr: &l.cuDeviceGetName, names: []string{"cuDeviceGetName"}},
		{addr: &l.cuDeviceGetAttribute, names: []string{"cuDeviceGetAttribute"}},
		{addr: &l.cuDevicePrimaryCtxRetain, names: []string{"cuDevicePrimaryCtxRetain"}},
		{addr: &l.cuDevicePrimaryCtxRelease, names: []string{"cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"}},
		{addr: &l.cuCtxSetCurrent, names: []string{"cuCtxSetCurrent"}},
		{addr: &l.cuCtxSynchronize, names: []string{"cuCtxSynchronize"}},
		{addr: &l.cuMemGetInfo, names: []string{"cuMemGetInfo_v2"}},
		{addr: &l.cuMemAlloc, names: []string{"cuMemAlloc_v2"}},
		{addr: &l.cuMemFree, names: []string{"cuMemFree_v2"}},
		{addr: &l.cuMemsetD8, names: []string{"cuMemsetD8_v2"}},
		{addr: &l.cuMemcpyHtoD, names: []string{"cuMemcpyHtoD_v2"}},
		{addr: &l.cuMemcpyDtoH, names: []string{"cuMemcpyDtoH_v2"}},
		{addr: &l.cuMemcpyDtoD, names: []string{"cuMemcpyDtoD_v2"}},
		{addr: &l.cuMemcpyHtoDAsync, names: []string{"cuMemcpyHtoDAsync_v2"}},
		{addr: &l.cuMemcpyDtoHAsync, names: []string{"cuMemcpyDtoHAsync_v2"}},
		{addr: &l.cuMemHostAlloc, names: []string{"cuMemHostAlloc"}},
		{addr: &l.cuMemFreeHost, names: []string{"cuMemFreeHost"}},
		{addr: &l.cuStreamCreate, names: []string{"cuStreamCreate"}},
		{addr: &l.cuStreamDestroy, names: []string{"cuStreamDestroy_v2", "cuStreamDestroy"}},
		{addr: &l.cuStreamSynchronize, names: []string{"cuStreamSynchronize"}},
		{addr: &l.cuGetErrorName, names: []string{"cuGetErrorName"}},
		{addr: &l.cuGetErrorString, names: []string{"cuGetErrorString"}},
		{addr: &l.cuModuleLoadData, names: []string{"cuModuleLoadData"}},
		{addr: &l.cuModuleUnload, names: []string{"cuModuleUnload"}},
		{addr: &l.cuModuleGetFunction, names: []string{"cuModuleGetFunction"}},
		{addr: &l.cuLaunchKernel, names: []string{"cuLaunchKernel"}},
	})
	if err != nil {
		return nil, err
	}
	if r := l.Init(); r != cudaSuccess {
		err := driverError(l, "", "cuInit", r)
		if r == cudaErrorNoDevice {
			err = fmt.Errorf("%w (the driver %s loaded but sees no GPU: check nvidia-smi and CUDA_VISIBLE_DEVICES)", err, name)
		}
		return nil, err
	}
	return l, nil
}

func res(r uintptr) result { return result(int32(uint32(r))) }

func (l *libcuda) Init() result {
	r, _, _ := purego.SyscallN(l.cuInit, 0)
	return res(r)
}

func (l *libcuda) DriverGetVersion() (int, result) {
	var v int32
	r, _, _ := purego.SyscallN(l.cuDriverGetVersion, uintptr(unsafe.Pointer(&v)))
	return int(v), res(r)
}

func (l *libcuda) DeviceGetCount() (int, result) {
	var n int32
	r, _, _ := purego.SyscallN(l.cuDeviceGetCount, uintptr(unsafe.Pointer(&n)))
	return int(n), res(r)
}

func (l *libcuda) DeviceGet(ordinal int) (int32, result) {
	var d int32
	r, _, _ := purego.SyscallN(l.cuDeviceGet, uintptr(unsafe.Pointer(&d)), uintptr(uint32(int32(ordinal))))
	return d, res(r)
}

func (l *libcuda) DeviceGetName(dev int32) (string, result) {
	buf := make([]byte, 256)
	r, _, _ := purego.SyscallN(l.cuDeviceGetName, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), uintptr(uint32(dev)))
	if i := strings.IndexByte(string(buf), 0); i >= 0 {
		buf = buf[:i]
	}
	return string(buf), res(r)
}

func (l *libcuda) DeviceGetAttribute(attr, dev int32) (int, result) {
	var v int32
	r, _, _ := purego.SyscallN(l.cuDeviceGetAttribute, uintptr(unsafe.Pointer(&v)), uintptr(uint32(attr)), uintptr(uint32(dev)))
	return int(v), res(r)
}

func (l *libcuda) DevicePrimaryCtxRetain(dev int32) (uintptr, result) {
	var ctx uintptr
	r, _, _ := purego.SyscallN(l.cuDevicePrimaryCtxRetain, uintptr(unsafe.Pointer(&ctx)), uintptr(uint32(dev)))
	return ctx, res(r)
}

func (l *libcuda) DevicePrimaryCtxRelease(dev int32) result {
	r, _, _ := purego.SyscallN(l.cuDevicePrimaryCtxRelease, uintptr(uint32(dev)))
	return res(r)
}

func (l *libcuda) CtxSetCurrent(ctx uintptr) result {
	r, _, _ := purego.SyscallN(l.cuCtxSetCurrent, ctx)
	return res(r)
}

func (l *libcuda) CtxSynchronize() result {
	r, _, _ := purego.SyscallN(l.cuCtxSynchronize)
	return res(r)
}

func (l *libcuda) MemGetInfo() (free, total uint64, rr result) {
	var f, t uint64
	r, _, _ := purego.SyscallN(l.cuMemGetInfo, uintptr(unsafe.Pointer(&f)), uintptr(unsafe.Pointer(&t)))
	return f, t, res(r)
}

func (l *libcuda) MemAlloc(n uint64) (uint64, result) {
	var p uint64
	r, _, _ := purego.SyscallN(l.cuMemAlloc, uintptr(unsafe.Pointer(&p)), uintptr(n))
	return p, res(r)
}

func (l *libcuda) MemFree(p uint64) result {
	r, _, _ := purego.SyscallN(l.cuMemFree, uintptr(p))
	return res(r)
}

func (l *libcuda) MemsetD8(p uint64, v byte, n uint64) result {
	r, _, _ := purego.SyscallN(l.cuMemsetD8, uintptr(p), uintptr(v), uintptr(n))
	return res(r)
}

func (l *libcuda) MemcpyHtoD(dst uint64, src unsafe.Pointer, n uint64) result {
	r, _, _ := purego.SyscallN(l.cuMemcpyHtoD, uintptr(dst), uintptr(src), uintptr(n))
	return res(r)
}

func (l *libcuda) MemcpyDtoH(dst unsafe.Pointer, src, n uint64) result {
	r, _, _ := purego.SyscallN(l.cuMemcpyDtoH, uintptr(dst), uintptr(src), uintptr(n))
	return res(r)
}

func (l *libcuda) MemcpyDtoD(dst, src, n uint64) result {
	r, _, _ := purego.SyscallN(l.cuMemcpyDtoD, uintptr(dst), uintptr(src), uintptr(n))
	return res(r)
}

func (l *libcuda) MemcpyHtoDAsync(dst uint64, src unsafe.Pointer, n uint64, s uintptr) result {
	r, _, _ := purego.SyscallN(l.cuMemcpyHtoDAsync, uintptr(dst), uintptr(src), uintptr(n), s)
	return res(r)
}

func (l *libcuda) MemcpyDtoHAsync(dst unsafe.Pointer, src, n uint64, s uintptr) result {
	r, _, _ := purego.SyscallN(l.cuMemcpyDtoHAsync, uintptr(dst), uintptr(src), uintptr(n), s)
	return res(r)
}

func (l *libcuda) MemHostAlloc(n uint64) (unsafe.Pointer, result) {
	var p unsafe.Pointer
	r, _, _ := purego.SyscallN(l.cuMemHostAlloc, uintptr(unsafe.Pointer(&p)), uintptr(n), 0)
	return p, res(r)
}

func (l *libcuda) MemFreeHost(p unsafe.Pointer) result {
	r, _, _ := purego.SyscallN(l.cuMemFreeHost, uintptr(p))
	return res(r)
}

func (l *libcuda) StreamCreate() (uintptr, result) {
	const nonBlocking = 1 // CU_STREAM_NON_BLOCKING
	var s uintptr
	r, _, _ := purego.SyscallN(l.cuStreamCreate, uintptr(unsafe.Pointer(&s)), nonBlocking)
	return s, res(r)
}

func (l *libcuda) StreamDestroy(s uintptr) result {
	r, _, _ := purego.SyscallN(l.cuStreamDestroy, s)
	return res(r)
}

func (l *libcuda) StreamSynchronize(s uintptr) result {
	r, _, _ := purego.SyscallN(l.cuStreamSynchronize, s)
	return res(r)
}

func (l *libcuda) GetErrorName(c result) string {
	var p *byte
	r, _, _ := purego.SyscallN(l.cuGetErrorName, uintptr(uint32(c)), uintptr(unsafe.Pointer(&p)))
	if res(r) != cudaSuccess || p == nil {
		return fmt.Sprintf("CUresult %d", int32(c))
	}
	return cString(p)
}

func (l *libcuda) GetErrorString(c result) string {
	var p *byte
	r, _, _ := purego.SyscallN(l.cuGetErrorString, uintptr(uint32(c)), uintptr(unsafe.Pointer(&p)))
	if res(r) != cudaSuccess || p == nil {
		return ""
	}
	return cString(p)
}

// cBytes returns s as a NUL-terminated C string.
func cBytes(s string) []byte { return append([]byte(s), 0) }

func (l *libcuda) ModuleLoadData(ptx string) (uintptr, result) {
	var m uintptr
	img := cBytes(ptx)
	r, _, _ := purego.SyscallN(l.cuModuleLoadData, uintptr(unsafe.Pointer(&m)), uintptr(unsafe.Pointer(&img[0])))
	runtime.KeepAlive(img)
	return m, res(r)
}

func (l *libcuda) ModuleUnload(m uintptr) result {
	r, _, _ := purego.SyscallN(l.cuModuleUnload, m)
	return res(r)
}

func (l *libcuda) ModuleGetFunction(m uintptr, name string) (uintptr, result) {
	var f uintptr
	n := cBytes(name)
	r, _, _ := purego.SyscallN(l.cuModuleGetFunction, uintptr(unsafe.Pointer(&f)), m, uintptr(unsafe.Pointer(&n[0])))
	runtime.KeepAlive(n)
	return f, res(r)
}

// LaunchKernel passes a's parameter pointers, which point into a.Values:
// both stay reachable through a, which the caller keeps (a bound
// program's launches are made once and reused, so a launch allocates
// nothing).
func (l *libcuda) LaunchKernel(f uintptr, a *launchArgs, stream uintptr) result {
	var params uintptr
	if len(a.Params) > 0 {
		params = uintptr(unsafe.Pointer(&a.Params[0]))
	}
	r, _, _ := purego.SyscallN(l.cuLaunchKernel, f, uintptr(a.Grid[0]), uintptr(a.Grid[1]), uintptr(a.Grid[2]),
		uintptr(a.Block[0]), uintptr(a.Block[1]), uintptr(a.Block[2]), uintptr(a.Shared), stream, params, 0)
	runtime.KeepAlive(a)
	return res(r)
}

// libcublas is cuBLAS: each field is the address of the entry point of the
// same name.
type libcublas struct {
	cublasCreate, cublasDestroy, cublasGetVersion, cublasSetStream, cublasSetWorkspace uintptr
	cublasSgemm, cublasGemmEx                                                          uintptr
}

func openLibcublas() (*libcublas, error) {
	h, name, err := dlopenFirst("cuBLAS", blasLibs,
		"install cuBLAS (CUDA 11 or later) or add the directory holding libcublas.so.* to LD_LIBRARY_PATH "+
			"(with PyTorch from pip: python3 -c 'import nvidia.cublas, os; print(os.path.dirname(nvidia.cublas.__file__) + \"/lib\")')")
	if err != nil {
		return nil, err
	}
	l := &libcublas{}
	err = resolve(name, h, []symbol{
		{addr: &l.cublasCreate, names: []string{"cublasCreate_v2"}},
		{addr: &l.cublasDestroy, names: []string{"cublasDestroy_v2"}},
		{addr: &l.cublasGetVersion, names: []string{"cublasGetVersion_v2"}},
		{addr: &l.cublasSetStream, names: []string{"cublasSetStream_v2"}},
		{addr: &l.cublasSetWorkspace, names: []string{"cublasSetWorkspace_v2"}, optional: true},
		{addr: &l.cublasSgemm, names: []string{"cublasSgemm_v2"}},
		{addr: &l.cublasGemmEx, names: []string{"cublasGemmEx"}},
	})
	if err != nil {
		return nil, err
	}
	return l, nil
}

func bres(r uintptr) blasStatus { return blasStatus(int32(uint32(r))) }

func (l *libcublas) Create() (uintptr, blasStatus) {
	var h uintptr
	r, _, _ := purego.SyscallN(l.cublasCreate, uintptr(unsafe.Pointer(&h)))
	return h, bres(r)
}

func (l *libcublas) Destroy(h uintptr) blasStatus {
	r, _, _ := purego.SyscallN(l.cublasDestroy, h)
	return bres(r)
}

func (l *libcublas) GetVersion(h uintptr) (int, blasStatus) {
	var v int32
	r, _, _ := purego.SyscallN(l.cublasGetVersion, h, uintptr(unsafe.Pointer(&v)))
	return int(v), bres(r)
}

func (l *libcublas) SetStream(h, s uintptr) blasStatus {
	r, _, _ := purego.SyscallN(l.cublasSetStream, h, s)
	return bres(r)
}

func (l *libcublas) SetWorkspace(h uintptr, p, n uint64) blasStatus {
	if l.cublasSetWorkspace == 0 {
		return 15 // CUBLAS_STATUS_NOT_SUPPORTED: cuBLAS before 11.? has no user workspace
	}
	r, _, _ := purego.SyscallN(l.cublasSetWorkspace, h, uintptr(p), uintptr(n))
	return bres(r)
}

// i32 passes a C int: the callee reads the low 32 bits of the register or
// stack slot.
func i32(v int32) uintptr { return uintptr(uint32(v)) }

func (l *libcublas) Sgemm(h uintptr, g *gemmArgs) blasStatus {
	r, _, _ := purego.SyscallN(l.cublasSgemm, h, i32(g.TransA), i32(g.TransB), i32(g.M), i32(g.N), i32(g.K),
		uintptr(unsafe.Pointer(g.Alpha)), uintptr(g.A), i32(g.LDA), uintptr(g.B), i32(g.LDB),
		uintptr(unsafe.Pointer(g.Beta)), uintptr(g.C), i32(g.LDC))
	return bres(r)
}

func (l *libcublas) GemmEx(h uintptr, g *gemmArgs) blasStatus {
	r, _, _ := purego.SyscallN(l.cublasGemmEx, h, i32(g.TransA), i32(g.TransB), i32(g.M), i32(g.N), i32(g.K),
		uintptr(unsafe.Pointer(g.Alpha)), uintptr(g.A), i32(g.AType), i32(g.LDA), uintptr(g.B), i32(g.BType), i32(g.LDB),
		uintptr(unsafe.Pointer(g.Beta)), uintptr(g.C), i32(dataR32F), i32(g.LDC), i32(compute32F), i32(gemmDefaultAlg))
	return bres(r)
}

func (l *libcublas) StatusName(s blasStatus) string { return statusName(s) }
