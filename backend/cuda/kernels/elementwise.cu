// Elementwise float32 kernels of headroom's CUDA backend, with the
// semantics of the reference kernels in package kernels (kernels/
// elementwise.go, kernels/binary.go): each sets dst and may run in place
// (dst == an input). Launch with any 1-D grid; every kernel walks its n
// elements with a grid-stride loop, so a grid of min(ceil(n/256), 65535)
// blocks of 256 threads covers any n.
//
// Compiled to PTX for sm_80 and sm_90 by build.sh; the driver JIT-compiles
// the PTX (cuModuleLoadData) for the GPU it runs on.

#define GRID_STRIDE(i, n) \
	for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < (n); i += (long long)blockDim.x * gridDim.x)

// add_f32: dst[i] = a[i] + b[i], for n elements.
extern "C" __global__ void add_f32(float *dst, const float *a, const float *b, long long n) {
	GRID_STRIDE(i, n) dst[i] = a[i] + b[i];
}

// mul_f32: dst[i] = a[i] * b[i].
extern "C" __global__ void mul_f32(float *dst, const float *a, const float *b, long long n) {
	GRID_STRIDE(i, n) dst[i] = a[i] * b[i];
}

// add_bias_f32: dst[r, c] = x[r, c] + bias[c] for x, dst [rows, cols] and
// bias [cols]: a Dense layer's bias broadcast over the batch.
extern "C" __global__ void add_bias_f32(float *dst, const float *x, const float *bias, long long rows, long long cols) {
	GRID_STRIDE(i, rows * cols) dst[i] = x[i] + bias[i % cols];
}

// relu_f32: dst[i] = max(x[i], 0). NaN stays NaN, as in kernels.Relu
// (x > 0 ? x : 0 would turn NaN into 0, so NaN is tested for first).
extern "C" __global__ void relu_f32(float *dst, const float *x, long long n) {
	GRID_STRIDE(i, n) {
		float v = x[i];
		dst[i] = (v > 0.0f || v != v) ? v : 0.0f;
	}
}

// relu_grad_f32: dst[i] = g[i] where x[i] > 0, else 0 (the gradient at 0 is
// taken as 0), as kernels.ReluGrad. x is Relu's input or output.
extern "C" __global__ void relu_grad_f32(float *dst, const float *x, const float *g, long long n) {
	GRID_STRIDE(i, n) dst[i] = x[i] > 0.0f ? g[i] : 0.0f;
}
