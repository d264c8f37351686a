// Package cuda is headroom's NVIDIA GPU device code: device memory as a
// mem.Device, so that a GPU's memory is charged to a ledger and refused
// with *mem.OOMError exactly as host memory is, pinned host memory,
// streams, and cuBLAS GEMM. It is not a backend yet: nothing here
// implements runtime.Backend (or compile.Target), so the runtime cannot
// reserve a plan on a GPU or run a Program there; a later change builds
// that backend on this package, beside backend/cpu and backend/sim.
//
// Terms:
//   - GPU: one CUDA device through its primary context (Open, Device). It is
//     a mem.Device: Map is one cuMemAlloc of exactly the size asked, Unmap is
//     cuMemFree, Capacity is the total memory cuMemGetInfo reports, and
//     Regions are device memory (Host false, Ptr the device address, Bytes
//     nil). It is also a mem.Zeroer (cuMemsetD8), so Allocator.AllocZeroed
//     works on it. Copies: CopyHtoD, CopyDtoH, CopyDtoD (synchronous) and
//     CopyHtoDAsync, CopyDtoHAsync (on a Stream, from pinned memory only).
//     Every copy and GEMM operand is checked to lie inside memory the GPU
//     mapped, so a wrong size is an error instead of a write over another
//     buffer.
//   - Pinned: page-locked host memory of a GPU (cuMemHostAlloc) as a host
//     mem.Device: the staging area input batches pass through, charged to
//     the host ledger (category input) by an Allocator over it.
//   - Stream: an ordered queue of device work (cuStreamCreate).
//   - BLAS: a cuBLAS handle. MatMul takes row-major operands with the shapes
//     of kernels.MatMul and computes them as the column-major transposed
//     problem (dstᵀ = op(b)ᵀ·op(a)ᵀ) with cublasSgemm_v2; MatMulEx does the
//     same for float16 and bfloat16 operands with float32 products and sums
//     (cublasGemmEx, CUBLAS_COMPUTE_32F). SetWorkspace gives cuBLAS a buffer
//     from the ledger (BLASWorkspaceBytes: NVIDIA's 32 MiB on Hopper, 4 MiB
//     before) instead of memory it would take from the driver itself.
//
// # What works where
//
// The default build (no tags) contains no CUDA code and no cgo: Open,
// Device, DeviceCount and NewBLAS fail with ErrNotBuilt ("built without
// -tags cuda"). With -tags cuda the driver API (libcuda.so.1) and cuBLAS
// (libcublas.so.13, .12 or .11) are loaded at run time by name with purego
// (dlopen and dlsym, no cgo), so `CGO_ENABLED=0 go build -tags cuda` gives
// a binary that runs on any Linux machine with an NVIDIA driver and, for
// GEMM, cuBLAS 11 or later, whatever CUDA version they are; on a machine
// without them Open fails saying which library is missing. cuBLAS is
// looked up on the library path (LD_LIBRARY_PATH; with PyTorch from pip it
// is under site-packages/nvidia/cublas/lib) and in /usr/local/cuda/lib64.
// CUDA_VISIBLE_DEVICES chooses and orders devices as for any CUDA program.
//
// Tests: in the default build, gpu_fake_test.go runs everything but the
// purego calls against a driver and a cuBLAS written in Go over host
// memory (fake_test.go): opening a device, ParseDevice (with a fuzz
// target), Map of exactly the size asked, OOM errors naming the device
// and the driver's free memory, an Allocator over a GPU, the bounds checks
// of every copy, pinned memory and streams, the row-major to column-major
// GEMM mapping against kernels.MatMul, SetWorkspace, and concurrent use;
// stub_test.go checks that every entry point fails with ErrNotBuilt. The
// tests built with -tags cuda (gpu_test.go) need a GPU and fail, saying
// what is missing, without one; testdata/fakelib/run.sh runs them against
// a C stand-in for libcuda and libcublas to check the bindings' calling
// conventions on a machine without a GPU. The device path of the runtime
// (staged copies, planned == measured on a device's own ledger, OOM at
// reservation) is tested on the simulated device in backend/sim, not here.
//
// Not here yet: device kernels other than GEMM. Their CUDA C sources and
// the script that compiles them to PTX for sm_80 and sm_90 are in
// kernels/ (build.sh); the PTX is to be committed beside them and embedded
// once generated with nvcc. Running a compiled Program on a GPU also needs
// the backend itself: a runtime.Backend whose Bind runs compile's
// instructions on buffers of a GPU (the runtime already binds device
// buffers as Spans and stages copies, as backend/sim shows).
//
// # Memory semantics, for TensorFlow users
//
// There is no preallocation: nothing is taken from the device when a GPU
// is opened (beyond the CUDA context the driver itself creates, and
// cuBLAS's handle). An Allocator over a GPU maps what the plan's
// reservation asks, once, before the first step; a request larger than
// the allocator's chunk (mem.AllocatorOptions.ChunkSize, 64 MiB by
// default), such as a large arena, is one cuMemAlloc of exactly its size
// rounded to a page, and with ChunkSize set to the plan's page-rounded
// peak the whole plan is one allocation of that size. So TensorFlow's
// "allow memory growth" is simply how headroom works, and the memory is
// known before step 1 rather than grown into. Freed chunks go back to the
// driver at once (cuMemFree), not into a cache.
//
// The per-process device memory limit (TensorFlow's memory_limit or
// per_process_gpu_memory_fraction, PyTorch's set_per_process_memory_
// fraction) is the budget of the ledger the device's allocator charges:
// mem.NewLedger("cuda:0", budget). It is a hard limit, checked at plan
// time and at reservation: a plan that does not fit fails with
// *mem.OOMError before anything is allocated, with the breakdown by
// category and what would fit. When the device itself runs out (other
// processes, or a budget above what is free), Map fails with
// *mem.OOMError naming the device ("cuda:0") and the driver's free memory.
//
// Driver accounting: cuMemGetInfo's free count falls by each allocation
// rounded up to 2 MiB (the driver's granularity for cuMemAlloc), so the
// device memory a run takes from the driver is the plan's mapped regions
// each rounded up to 2 MiB, plus cuBLAS's handle and, unless SetWorkspace
// is used, its workspace.
//
// In the life of a step, this package is meant to be the device under
// mem for a CUDA backend: the compiler plans, the runtime reserves through
// an Allocator over a GPU, and GEMMs run through BLAS on the reserved
// buffers. Today nothing reserves a plan on a GPU: an Allocator over a
// GPU and BLAS on its buffers are used by this package's own tests only,
// and no command or trainer opens a GPU.
package cuda
