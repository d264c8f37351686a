// Reductions over float32, with the semantics of kernels.SumRows and
// kernels.ReduceSum (kernels/reduce.go). Results are deterministic: each
// output is summed by one thread or one block in a fixed order (no atomic
// float adds), so two runs give the same bits.

#include <math_constants.h>

// sum_rows_f32: dst[c] = Σ_r x[r, c] for x [rows, cols], dst [cols]: the
// gradient of a bias broadcast over the batch. One thread per column, so
// consecutive threads read consecutive addresses of each row. Launch with
// any 1-D grid (grid-stride over columns).
extern "C" __global__ void sum_rows_f32(float *dst, const float *x, long long rows, long long cols) {
	for (long long c = blockIdx.x * (long long)blockDim.x + threadIdx.x; c < cols; c += (long long)blockDim.x * gridDim.x) {
		float s = 0.0f;
		for (long long r = 0; r < rows; r++) s += x[r * cols + c];
		dst[c] = s;
	}
}

// sum_partial_f32: part[b] = the sum of block b's share of x [n]: launch
// with blockDim.x a power of two <= 1024 and blockDim.x floats of shared
// memory, then run it again over part with one block to finish
// (ReduceSum of all elements, e.g. a mean loss, in two launches).
extern "C" __global__ void sum_partial_f32(float *part, const float *x, long long n) {
	extern __shared__ float s[];
	float acc = 0.0f;
	for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)blockDim.x * gridDim.x) acc += x[i];
	s[threadIdx.x] = acc;
	for (int w = blockDim.x / 2; w > 0; w /= 2) {
		__syncthreads();
		if (threadIdx.x < w) s[threadIdx.x] += s[threadIdx.x + w];
	}
	if (threadIdx.x == 0) part[blockIdx.x] = s[0];
}

// max_rows_f32: dst[r] = max_c x[r, c] for x [rows, cols]: one thread per
// row. As kernels.ReduceMax: an empty row gives -Inf, and a NaN makes the
// row's result NaN (fmaxf would drop it).
extern "C" __global__ void max_rows_f32(float *dst, const float *x, long long rows, long long cols) {
	for (long long r = blockIdx.x * (long long)blockDim.x + threadIdx.x; r < rows; r += (long long)blockDim.x * gridDim.x) {
		const float *xr = x + r * cols;
		float m = -CUDART_INF_F;
		for (long long c = 0; c < cols; c++) {
			float v = xr[c];
			if (v != v) {
				m = v;
				break;
			}
			if (v > m) m = v;
		}
		dst[r] = m;
	}
}
