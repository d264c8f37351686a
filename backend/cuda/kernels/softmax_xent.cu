// Softmax cross-entropy with integer labels, forward and gradient, with
// the semantics of kernels.SoftmaxCrossEntropy(Grad) (kernels/softmax.go):
//
//   loss[r]    = log Σ_c exp(x[r, c] - max_r) - (x[r, label[r]] - max_r)
//   dst[r, c]  = g[r] · (softmax(x[r])[c] - [c == label[r]])
//
// for logits x [rows, cols], labels, loss and g [rows]. The row maximum is
// subtracted before exponentiating, so a row shifted by +1000 neither
// overflows nor loses the loss to rounding. A label outside [0, cols) is
// bad data: that row's loss (or gradient row) is NaN and *bad is lowered
// to the smallest such row (atomicMin; the caller sets *bad to rows before
// the launch and reads rows back when every label is valid).
//
// Launch one block per row (grid = rows), blockDim.x a power of two
// <= 1024, and blockDim.x floats of shared memory. Sums are in float
// within a block (tree reduction): order differs from the reference's
// sequential float64 sum within float32 rounding.

#include <math_constants.h>

// block_reduce leaves in s[0] the max (op 0) or sum (op 1) of the blockDim.x
// values in s.
__device__ void block_reduce(float *s, int op) {
	for (int w = blockDim.x / 2; w > 0; w /= 2) {
		__syncthreads();
		if (threadIdx.x < w) {
			float a = s[threadIdx.x], b = s[threadIdx.x + w];
			s[threadIdx.x] = op == 0 ? fmaxf(a, b) : a + b;
		}
	}
	__syncthreads();
}

// row_stats sets *mx to the row's maximum and *lse to log Σ exp(x - max).
__device__ void row_stats(const float *xr, long long cols, float *s, float *mx, float *lse) {
	float m = -CUDART_INF_F;
	for (long long c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, xr[c]);
	s[threadIdx.x] = m;
	block_reduce(s, 0);
	m = s[0];
	__syncthreads();
	float sum = 0.0f;
	for (long long c = threadIdx.x; c < cols; c += blockDim.x) sum += expf(xr[c] - m);
	s[threadIdx.x] = sum;
	block_reduce(s, 1);
	*mx = m;
	*lse = logf(s[0]);
}

extern "C" __global__ void softmax_xent_f32(float *loss, const float *x, const int *labels, long long rows, long long cols, int *bad) {
	extern __shared__ float s[];
	long long r = blockIdx.x;
	const float *xr = x + r * cols;
	int l = labels[r];
	float mx, lse;
	row_stats(xr, cols, s, &mx, &lse);
	if (threadIdx.x == 0) {
		if (l < 0 || l >= cols) {
			loss[r] = CUDART_NAN_F;
			atomicMin(bad, (int)r);
		} else {
			loss[r] = lse - (xr[l] - mx);
		}
	}
}

// softmax_xent_grad_f32 may run in place (dst == x): each row's statistics
// are complete (block_reduce ends with a barrier) before any thread writes.
extern "C" __global__ void softmax_xent_grad_f32(float *dst, const float *x, const int *labels, const float *g, long long rows, long long cols, int *bad) {
	extern __shared__ float s[];
	long long r = blockIdx.x;
	const float *xr = x + r * cols;
	float *dr = dst + r * cols;
	int l = labels[r];
	float mx, lse;
	row_stats(xr, cols, s, &mx, &lse);
	if (l < 0 || l >= cols) {
		for (long long c = threadIdx.x; c < cols; c += blockDim.x) dr[c] = CUDART_NAN_F;
		if (threadIdx.x == 0) atomicMin(bad, (int)r);
		return;
	}
	float gr = g[r];
	for (long long c = threadIdx.x; c < cols; c += blockDim.x) {
		float p = expf(xr[c] - mx - lse);
		dr[c] = gr * (p - (c == l ? 1.0f : 0.0f));
	}
}
