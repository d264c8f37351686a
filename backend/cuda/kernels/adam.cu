// The Adam (and AdamW) update of one parameter, fused into one pass, with
// the arithmetic of optim.Adam (optim/optim.go), which follows Kingma and
// Ba, "Adam: A Method for Stochastic Optimization" (2015), Algorithm 1,
// with the bias corrections folded into two per-step scalars:
//
//   g' = g + wd·w                     (coupled weight decay; wd = 0: none)
//   m  = β1·m + (1-β1)·g'
//   v  = β2·v + (1-β2)·g'²
//   w  = w·(1 - lr_wd)                (decoupled, AdamW; lr_wd = 0: none)
//   w  = w - step_size · m / (√v / bias2_sqrt + ε)
//
// step_size = lr / (1 - β1ᵗ) and bias2_sqrt = √(1 - β2ᵗ) for step t (from
// 1), as optim.Adam.Feed computes them. w, m, v are updated in place; g is
// the gradient. Launch with any 1-D grid (grid-stride loop).

extern "C" __global__ void adam_f32(float *w, float *m, float *v, const float *g, long long n,
                                    float beta1, float beta2, float eps, float step_size, float bias2_sqrt,
                                    float wd, float lr_wd) {
	for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)blockDim.x * gridDim.x) {
		float wi = w[i];
		float gi = g[i] + wd * wi;
		float mi = beta1 * m[i] + (1.0f - beta1) * gi;
		float vi = beta2 * v[i] + (1.0f - beta2) * gi * gi;
		wi = wi * (1.0f - lr_wd);
		w[i] = wi - step_size * (mi / (sqrtf(vi) / bias2_sqrt + eps));
		m[i] = mi;
		v[i] = vi;
	}
}
