// Package cuda is headroom's CUDA backend and the NVIDIA GPU device code
// under it. Target is compile's Target and runtime's Backend on one GPU:
// the plan's arena is one cuMemAlloc of exactly its size, weights and
// optimizer state sit in device memory on the device ledger, inputs are
// staged through pinned host memory on the host ledger, and every
// instruction runs as kernels rendered in Go as PTX text (package ptx,
// loaded with cuModuleLoadData, no nvcc) or as products on cuBLAS, queued
// in order on one stream. Below it: device memory as a mem.Device, so that
// a GPU's memory is charged to a ledger and refused with *mem.OOMError
// exactly as host memory is, pinned host memory, streams, and cuBLAS GEMM.
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
//   - Target: the backend (New opens device N; Planning states a device
//     without one, to plan and render its kernels; NewEmulated runs on an
//     emulated GPU, below).
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
// memory (emulated.go): opening a device, ParseDevice (with a fuzz
// target), Map of exactly the size asked, OOM errors naming the device
// and the driver's free memory, an Allocator over a GPU, the bounds checks
// of every copy, pinned memory and streams, the row-major to column-major
// GEMM mapping against kernels.MatMul, SetWorkspace, and concurrent use;
// stub_test.go checks that every entry point fails with ErrNotBuilt. The
// same emulated driver runs kernel launches in the PTX interpreter
// (ptx/interp) on the exact text a driver would compile, so whole runs go
// through the backend with no GPU (NewEmulated; train_fake_test.go): the
// reference mlp and cnn, and small gpt and lstm, match the host's losses
// within 1e-5 relative, planned == measured on the device ledger, and a
// budget one byte under the plan fails before step 1. ptxas_test.go
// assembles every kernel of the six reference models (three precision
// policies) with NVIDIA's ptxas for sm_80 and sm_90 (scripts/test.sh
// fetches it). The tests built with -tags cuda (gpu_test.go,
// gpu_suite_test.go) need a GPU and fail, saying what is missing, without
// one: scripts/gpu-check.sh runs them on one, with bench/gpucheck;
// testdata/fakelib/run.sh runs them against a C stand-in for libcuda and
// libcublas to check the bindings' calling conventions without a GPU.
//
// Not here yet: NCCL (a data-parallel run's collectives: Bind refuses a
// program with one), and copies on a stream of their own overlapping
// compute (every step's work is queued in order on one stream). No run on
// a real GPU has happened yet.
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
// In the life of a step: the compiler asks Target what it runs and how
// much workspace each instruction needs, the runtime reserves the plan
// through an Allocator over the GPU, Bind renders and loads each
// instruction's kernels once, and each step launches them in order.
package cuda
