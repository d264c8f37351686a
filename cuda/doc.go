// Package cuda is headroom's NVIDIA GPU backend: device memory as a
// mem.Device, so that a GPU's memory is planned, charged to a ledger and
// refused with *mem.OOMError exactly as host memory is, and cuBLAS GEMM.
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
// Tests: the package's logic (the mem.Device contract, OOM errors, bounds
// checks, the row-major to column-major GEMM mapping) is tested in the
// default build against a driver written in Go; the reference models'
// training steps run on mem.NewSimulated with planned == measured and
// every OOM path (sim_test.go). The tests built with -tags cuda need a GPU
// and fail, saying what is missing, without one; testdata/fakelib/run.sh
// runs them against a C stand-in for libcuda and libcublas to check the
// bindings' calling conventions on a machine without a GPU.
//
// Not here yet: device kernels other than GEMM. Their CUDA C sources and
// the script that compiles them to PTX for sm_80 and sm_90 are in
// kernels/ (build.sh); the PTX is to be committed beside them and embedded
// once generated with nvcc. Running a compiled Program on a GPU also needs
// the runtime to bind device addresses instead of host slices.
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
// In the life of a step, this package is the device under mem: the
// compiler plans, the runtime reserves through an Allocator over a GPU (or
// over mem.NewSimulated, its stand-in in tests), and GEMMs run through
// BLAS on the reserved buffers.
package cuda
