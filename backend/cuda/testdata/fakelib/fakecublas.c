/*
 * A stand-in for libcublas.so.12 over fakecuda.c's "device" memory (see
 * there): the cuBLAS entry points headroom calls, with the prototypes of
 * cublas_api.h, GEMM computed as the cuBLAS documentation defines it
 * (column-major, C = alpha·op(A)·op(B) + beta·C, C not read when beta is
 * 0) in double, after the checks cuBLAS makes on the leading dimensions.
 * It links to the fake libcuda.so.1, as cuBLAS links to the driver, and
 * fails unless a context is current on the calling thread.
 */
#include <stdint.h>
#include <string.h>

typedef unsigned long long CUdeviceptr;
typedef void *CUstream;
int fake_ready(void);
int fake_inside(CUdeviceptr p, size_t n);
#define ready fake_ready
#define inside fake_inside

typedef int cublasStatus_t;
typedef void *cublasHandle_t;
static int handles;

cublasStatus_t cublasCreate_v2(cublasHandle_t *h) { if (!ready()) return 1; *h = (cublasHandle_t)(uintptr_t)(++handles); return 0; }
cublasStatus_t cublasDestroy_v2(cublasHandle_t h) { return h ? 0 : 1; }
cublasStatus_t cublasGetVersion_v2(cublasHandle_t h, int *v) { *v = 120903; return h ? 0 : 1; }
cublasStatus_t cublasSetStream_v2(cublasHandle_t h, CUstream s) { return h && s ? 0 : 7; }
cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t h, void *w, size_t n) {
	return h && ((uintptr_t)w % 256 == 0) && inside((CUdeviceptr)w, n) ? 0 : 7;
}

static float half(uint16_t h) {
	uint32_t s = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 31, m = h & 1023, f;
	if (e == 0) { /* zero or subnormal: m · 2^-24 */
		float v = (float)m / 16777216.0f;
		return s ? -v : v;
	}
	if (e == 31) f = s | 0x7f800000u | (m << 13);
	else f = s | ((e + 112) << 23) | (m << 13);
	float v;
	memcpy(&v, &f, 4);
	return v;
}
static float bf16(uint16_t h) { uint32_t f = (uint32_t)h << 16; float v; memcpy(&v, &f, 4); return v; }
static double elem(const void *p, int type, long i) {
	if (type == 0) return ((const float *)p)[i];
	if (type == 2) return half(((const uint16_t *)p)[i]);
	return bf16(((const uint16_t *)p)[i]);
}
static int esize(int type) { return type == 0 ? 4 : 2; }

static cublasStatus_t gemm(int ta, int tb, int m, int n, int k, const float *alpha, const void *A, int at, int lda,
                           const void *B, int bt, int ldb, const float *beta, float *C, int ldc) {
	if (!ready()) return 1;
	if ((ta != 0 && ta != 1) || (tb != 0 && tb != 1) || m < 0 || n < 0 || k < 0) return 7;
	if ((at != 0 && at != 2 && at != 14) || (bt != 0 && bt != 2 && bt != 14)) return 7;
	int rowsA = ta ? k : m, colsA = ta ? m : k, rowsB = tb ? n : k, colsB = tb ? k : n;
	if (lda < (rowsA > 1 ? rowsA : 1) || ldb < (rowsB > 1 ? rowsB : 1) || ldc < (m > 1 ? m : 1)) return 7;
	if (m == 0 || n == 0) return 0;
	if (!inside((CUdeviceptr)C, ((size_t)(n - 1) * ldc + m) * 4)) return 14;
	if (k > 0 && (!inside((CUdeviceptr)A, ((size_t)(colsA - 1) * lda + rowsA) * esize(at)) ||
	              !inside((CUdeviceptr)B, ((size_t)(colsB - 1) * ldb + rowsB) * esize(bt)))) return 14;
	for (int j = 0; j < n; j++)
		for (int i = 0; i < m; i++) {
			double s = 0;
			for (int p = 0; p < k; p++) {
				double a = ta ? elem(A, at, p + (long)i * lda) : elem(A, at, i + (long)p * lda);
				double b = tb ? elem(B, bt, j + (long)p * ldb) : elem(B, bt, p + (long)j * ldb);
				s += a * b;
			}
			double v = *alpha * s;
			if (*beta != 0) v += *beta * C[i + (long)j * ldc];
			C[i + (long)j * ldc] = (float)v;
		}
	return 0;
}

cublasStatus_t cublasSgemm_v2(cublasHandle_t h, int ta, int tb, int m, int n, int k, const float *alpha, const float *A, int lda,
                              const float *B, int ldb, const float *beta, float *C, int ldc) {
	if (!h) return 1;
	return gemm(ta, tb, m, n, k, alpha, A, 0, lda, B, 0, ldb, beta, C, ldc);
}

cublasStatus_t cublasGemmEx(cublasHandle_t h, int ta, int tb, int m, int n, int k, const void *alpha, const void *A, int at, int lda,
                            const void *B, int bt, int ldb, const void *beta, void *C, int ct, int ldc, int compute, int algo) {
	if (!h) return 1;
	if (ct != 0 || compute != 68 /* CUBLAS_COMPUTE_32F */ || algo != -1 /* CUBLAS_GEMM_DEFAULT */) return 7;
	return gemm(ta, tb, m, n, k, alpha, A, at, lda, B, bt, ldb, beta, C, ldc);
}
