package cuda

import (
	"errors"
	"fmt"
	"unsafe"
)

// ErrNotBuilt is the error of every entry point of a binary built without
// the build tag cuda: such a binary has no CUDA code at all.
var ErrNotBuilt = errors.New("cuda: built without -tags cuda (rebuild with `go build -tags cuda` to use a GPU)")

// result is a CUresult of the driver API (cuda.h); 0 is CUDA_SUCCESS.
type result int32

// The CUresult codes headroom branches on (cuda.h).
const (
	cudaSuccess          result = 0
	cudaErrorInvalidVal  result = 1
	cudaErrorOutOfMemory result = 2
	cudaErrorNoDevice    result = 100
	cudaErrorInvalidDev  result = 101
)

// blasStatus is a cublasStatus_t (cublas_api.h); 0 is CUBLAS_STATUS_SUCCESS.
type blasStatus int32

const (
	blasSuccess     blasStatus = 0
	blasAllocFailed blasStatus = 3
)

// blasStatusNames are the names of cublasStatus_t values (cublas_api.h),
// for cuBLAS versions without cublasGetStatusName.
var blasStatusNames = map[blasStatus]string{
	0: "CUBLAS_STATUS_SUCCESS", 1: "CUBLAS_STATUS_NOT_INITIALIZED", 3: "CUBLAS_STATUS_ALLOC_FAILED",
	7: "CUBLAS_STATUS_INVALID_VALUE", 8: "CUBLAS_STATUS_ARCH_MISMATCH", 11: "CUBLAS_STATUS_MAPPING_ERROR",
	13: "CUBLAS_STATUS_EXECUTION_FAILED", 14: "CUBLAS_STATUS_INTERNAL_ERROR", 15: "CUBLAS_STATUS_NOT_SUPPORTED",
	16: "CUBLAS_STATUS_LICENSE_ERROR",
}

// Device attributes read at Open (CUdevice_attribute, cuda.h).
const (
	attrComputeCapabilityMajor = 75
	attrComputeCapabilityMinor = 76
)

// driver is the part of the CUDA driver API (libcuda.so.1) that headroom
// calls, one method per entry point, with the C out-parameters turned into
// results. The build with tag cuda implements it over the real library
// (load_cuda.go); the package's own tests implement it in Go over host
// memory to check everything above the library without a GPU.
//
// Device addresses are uint64 (CUdeviceptr) and never Go pointers; host
// addresses are unsafe.Pointer. Contexts and streams are opaque handles.
type driver interface {
	Init() result                                                               // cuInit(0)
	DriverGetVersion() (int, result)                                            // cuDriverGetVersion
	DeviceGetCount() (int, result)                                              // cuDeviceGetCount
	DeviceGet(ordinal int) (int32, result)                                      // cuDeviceGet
	DeviceGetName(dev int32) (string, result)                                   // cuDeviceGetName
	DeviceGetAttribute(attr, dev int32) (int, result)                           // cuDeviceGetAttribute
	DevicePrimaryCtxRetain(dev int32) (uintptr, result)                         // cuDevicePrimaryCtxRetain
	DevicePrimaryCtxRelease(dev int32) result                                   // cuDevicePrimaryCtxRelease_v2
	CtxSetCurrent(ctx uintptr) result                                           // cuCtxSetCurrent
	CtxSynchronize() result                                                     // cuCtxSynchronize
	MemGetInfo() (free, total uint64, r result)                                 // cuMemGetInfo_v2
	MemAlloc(n uint64) (uint64, result)                                         // cuMemAlloc_v2
	MemFree(p uint64) result                                                    // cuMemFree_v2
	MemsetD8(p uint64, v byte, n uint64) result                                 // cuMemsetD8_v2
	MemcpyHtoD(dst uint64, src unsafe.Pointer, n uint64) result                 // cuMemcpyHtoD_v2
	MemcpyDtoH(dst unsafe.Pointer, src, n uint64) result                        // cuMemcpyDtoH_v2
	MemcpyDtoD(dst, src, n uint64) result                                       // cuMemcpyDtoD_v2
	MemcpyHtoDAsync(dst uint64, src unsafe.Pointer, n uint64, s uintptr) result // cuMemcpyHtoDAsync_v2
	MemcpyDtoHAsync(dst unsafe.Pointer, src, n uint64, s uintptr) result        // cuMemcpyDtoHAsync_v2
	MemHostAlloc(n uint64) (unsafe.Pointer, result)                             // cuMemHostAlloc(n, 0)
	MemFreeHost(p unsafe.Pointer) result                                        // cuMemFreeHost
	StreamCreate() (uintptr, result)                                            // cuStreamCreate(CU_STREAM_NON_BLOCKING)
	StreamDestroy(s uintptr) result                                             // cuStreamDestroy_v2
	StreamSynchronize(s uintptr) result                                         // cuStreamSynchronize
	GetErrorName(r result) string                                               // cuGetErrorName
	GetErrorString(r result) string                                             // cuGetErrorString
	// Kernels: a module from PTX text (JIT-compiled by the driver for the
	// device), its entry by name, and a launch on a stream.
	ModuleLoadData(ptx string) (uintptr, result)                  // cuModuleLoadData (the text, NUL-terminated)
	ModuleUnload(m uintptr) result                                // cuModuleUnload
	ModuleGetFunction(m uintptr, name string) (uintptr, result)   // cuModuleGetFunction
	LaunchKernel(f uintptr, l *launchArgs, stream uintptr) result // cuLaunchKernel
}

// launchArgs are a kernel launch's dimensions and parameters, as
// cuLaunchKernel takes them: Params points to one pointer per kernel
// parameter, each to the parameter's value (here every parameter is a
// .u64 device address, held in Values).
type launchArgs struct {
	Grid, Block [3]uint32
	Shared      uint32
	Params      []unsafe.Pointer // Params[i] = &Values[i]
	Values      []uint64
}

// cuBLAS operation and data type codes (cublas_api.h, library_types.h).
const (
	blasOpN        = 0  // CUBLAS_OP_N
	blasOpT        = 1  // CUBLAS_OP_T
	dataR32F       = 0  // CUDA_R_32F
	dataR16F       = 2  // CUDA_R_16F
	dataR16BF      = 14 // CUDA_R_16BF
	compute32F     = 68 // CUBLAS_COMPUTE_32F: products and sums in float32
	gemmDefaultAlg = -1 // CUBLAS_GEMM_DEFAULT
)

// gemmArgs are the arguments of one column-major cuBLAS GEMM,
// C = alpha·op(A)·op(B) + beta·C with C [M, N] (leading dimension LDC),
// op(A) [M, K] and op(B) [K, N], as cublasSgemm_v2 and cublasGemmEx take
// them. AType and BType are CUDA data types (dataR32F, dataR16F,
// dataR16BF); C is always float32 and products are summed in float32.
type gemmArgs struct {
	TransA, TransB int32 // blasOpN or blasOpT
	M, N, K        int32
	Alpha, Beta    *float32 // host pointers (CUBLAS_POINTER_MODE_HOST)
	A              uint64
	AType, LDA     int32
	B              uint64
	BType, LDB     int32
	C              uint64
	LDC            int32
}

// blas is the part of cuBLAS (libcublas.so.12 or .11) that headroom calls.
type blas interface {
	Create() (uintptr, blasStatus)                         // cublasCreate_v2
	Destroy(h uintptr) blasStatus                          // cublasDestroy_v2
	GetVersion(h uintptr) (int, blasStatus)                // cublasGetVersion_v2
	SetStream(h, s uintptr) blasStatus                     // cublasSetStream_v2
	SetWorkspace(h uintptr, p uint64, n uint64) blasStatus // cublasSetWorkspace_v2
	Sgemm(h uintptr, g *gemmArgs) blasStatus               // cublasSgemm_v2 (AType = BType = dataR32F)
	GemmEx(h uintptr, g *gemmArgs) blasStatus              // cublasGemmEx(..., CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT)
	StatusName(s blasStatus) string                        // cublasGetStatusName, or the table above
}

// Error is a failure reported by the CUDA driver or by cuBLAS: the call
// that failed, on which device, and the library's code, name and message.
type Error struct {
	Op     string // the C entry point, e.g. "cuMemAlloc_v2"
	Device string // "cuda:0"; empty before a device is chosen
	Code   int    // the CUresult or cublasStatus_t
	Name   string // e.g. "CUDA_ERROR_OUT_OF_MEMORY"
	Msg    string // the driver's description; may be empty
}

func (e *Error) Error() string {
	where := ""
	if e.Device != "" {
		where = " on " + e.Device
	}
	if e.Msg != "" {
		return fmt.Sprintf("cuda: %s%s: %s (%d): %s", e.Op, where, e.Name, e.Code, e.Msg)
	}
	return fmt.Sprintf("cuda: %s%s: %s (%d)", e.Op, where, e.Name, e.Code)
}

// driverError turns a failing CUresult into an *Error; nil for success.
func driverError(d driver, dev, op string, r result) error {
	if r == cudaSuccess {
		return nil
	}
	return &Error{Op: op, Device: dev, Code: int(r), Name: d.GetErrorName(r), Msg: d.GetErrorString(r)}
}

// blasError turns a failing cublasStatus_t into an *Error; nil for success.
func blasError(b blas, dev, op string, s blasStatus) error {
	if s == blasSuccess {
		return nil
	}
	return &Error{Op: op, Device: dev, Code: int(s), Name: b.StatusName(s)}
}

// statusName names a cublasStatus_t from the table, for cuBLAS versions
// that lack cublasGetStatusName.
func statusName(s blasStatus) string {
	if n, ok := blasStatusNames[s]; ok {
		return n
	}
	return fmt.Sprintf("CUBLAS_STATUS_%d", int32(s))
}
