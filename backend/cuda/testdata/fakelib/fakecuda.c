/*
 * A stand-in for libcuda.so.1 on a machine without a GPU (fakecublas.c is
 * the one for libcublas.so.12), for checking the purego bindings of
 * load_cuda.go: every entry point
 * headroom calls, with the prototype of cuda.h / cublas_api.h, over host
 * memory (a "device pointer" is a host address). It checks what the real
 * library would reject (a context not current on the calling thread, bad
 * leading dimensions, unknown data types), keeps cuMemGetInfo's free count
 * in 2 MiB units as the driver does, and computes GEMM as the cuBLAS
 * documentation defines it (column-major). Build and run with run.sh.
 * It is a test fixture, not part of any headroom binary.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef void *CUstream;
typedef unsigned long long CUdeviceptr;

#define TOTAL (1ull << 30)
#define GRAN (2ull << 20)
#define CTX ((CUcontext)0xc0ffee)

static __thread CUcontext current; /* per thread, as in the driver */
static int retained;
static size_t used;

struct alloc { CUdeviceptr p; size_t n; };
static struct alloc allocs[4096];

static size_t rounded(size_t n) { return (n + GRAN - 1) / GRAN * GRAN; }
/* fake_ready and fake_inside are for fakecublas.c, which links to this
 * library as cuBLAS links to the driver. */
int fake_ready(void) { return current == CTX && retained > 0; }
#define ready fake_ready
#define NEED_CTX do { if (!ready()) return 201; /* CUDA_ERROR_INVALID_CONTEXT */ } while (0)

/* fake_inside reports whether [p, p+n) lies in one live allocation. */
int fake_inside(CUdeviceptr p, size_t n) {
	for (int i = 0; i < 4096; i++)
		if (allocs[i].p && p >= allocs[i].p && p - allocs[i].p + n <= allocs[i].n) return 1;
	return 0;
}
#define inside fake_inside

CUresult cuInit(unsigned int flags) { return flags == 0 ? 0 : 1; }
CUresult cuDriverGetVersion(int *v) { *v = 12080; return 0; }
CUresult cuDeviceGetCount(int *n) { *n = 1; return 0; }
CUresult cuDeviceGet(CUdevice *d, int ordinal) { if (ordinal != 0) return 101; *d = 0; return 0; }
CUresult cuDeviceGetName(char *name, int len, CUdevice d) {
	if (d != 0) return 101;
	strncpy(name, "Fake GPU (testdata/fakelib)", len);
	return 0;
}
CUresult cuDeviceGetAttribute(int *v, int attr, CUdevice d) {
	if (d != 0) return 101;
	if (attr == 75) { *v = 8; return 0; }
	if (attr == 76) { *v = 0; return 0; }
	return 1;
}
CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d) { if (d != 0) return 101; retained++; *c = CTX; return 0; }
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) { if (d != 0 || retained == 0) return 101; retained--; return 0; }
CUresult cuCtxSetCurrent(CUcontext c) { current = c; return 0; }
CUresult cuCtxSynchronize(void) { NEED_CTX; return 0; }
CUresult cuMemGetInfo_v2(size_t *free, size_t *total) { NEED_CTX; *free = TOTAL - used; *total = TOTAL; return 0; }
CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) {
	NEED_CTX;
	if (n == 0) return 1;
	if (used + rounded(n) > TOTAL) return 2; /* CUDA_ERROR_OUT_OF_MEMORY */
	void *m = aligned_alloc(256, (n + 255) / 256 * 256);
	if (!m) return 2;
	for (int i = 0; i < 4096; i++)
		if (!allocs[i].p) {
			allocs[i].p = (CUdeviceptr)m;
			allocs[i].n = n;
			used += rounded(n);
			*p = (CUdeviceptr)m;
			return 0;
		}
	free(m);
	return 2;
}
CUresult cuMemFree_v2(CUdeviceptr p) {
	NEED_CTX;
	for (int i = 0; i < 4096; i++)
		if (allocs[i].p == p) {
			used -= rounded(allocs[i].n);
			free((void *)p);
			allocs[i].p = 0;
			return 0;
		}
	return 1;
}
CUresult cuMemsetD8_v2(CUdeviceptr p, unsigned char v, size_t n) {
	NEED_CTX;
	if (!inside(p, n)) return 1;
	memset((void *)p, v, n);
	return 0;
}
CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void *s, size_t n) { NEED_CTX; if (!inside(d, n)) return 1; memcpy((void *)d, s, n); return 0; }
CUresult cuMemcpyDtoH_v2(void *d, CUdeviceptr s, size_t n) { NEED_CTX; if (!inside(s, n)) return 1; memcpy(d, (void *)s, n); return 0; }
CUresult cuMemcpyDtoD_v2(CUdeviceptr d, CUdeviceptr s, size_t n) {
	NEED_CTX;
	if (!inside(d, n) || !inside(s, n)) return 1;
	memmove((void *)d, (void *)s, n);
	return 0;
}
static int streams;
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *s, size_t n, CUstream st) { if (!st) return 400; return cuMemcpyHtoD_v2(d, s, n); }
CUresult cuMemcpyDtoHAsync_v2(void *d, CUdeviceptr s, size_t n, CUstream st) { if (!st) return 400; return cuMemcpyDtoH_v2(d, s, n); }
CUresult cuMemHostAlloc(void **p, size_t n, unsigned int flags) { NEED_CTX; *p = aligned_alloc(4096, (n + 4095) / 4096 * 4096); return *p ? 0 : 2; }
CUresult cuMemFreeHost(void *p) { NEED_CTX; free(p); return 0; }
CUresult cuStreamCreate(CUstream *s, unsigned int flags) { NEED_CTX; if (flags != 1) return 1; *s = (CUstream)(uintptr_t)(++streams); return 0; }
CUresult cuStreamDestroy_v2(CUstream s) { NEED_CTX; return s ? 0 : 400; }
CUresult cuStreamSynchronize(CUstream s) { NEED_CTX; return s ? 0 : 400; }
CUresult cuGetErrorName(CUresult e, const char **s) {
	switch (e) {
	case 0: *s = "CUDA_SUCCESS"; return 0;
	case 1: *s = "CUDA_ERROR_INVALID_VALUE"; return 0;
	case 2: *s = "CUDA_ERROR_OUT_OF_MEMORY"; return 0;
	case 101: *s = "CUDA_ERROR_INVALID_DEVICE"; return 0;
	case 201: *s = "CUDA_ERROR_INVALID_CONTEXT"; return 0;
	case 400: *s = "CUDA_ERROR_INVALID_HANDLE"; return 0;
	}
	*s = 0;
	return 1;
}
CUresult cuGetErrorString(CUresult e, const char **s) {
	if (e == 2) { *s = "out of memory"; return 0; }
	return cuGetErrorName(e, s);
}


/* Kernels: a module is a copy of the PTX text (it must be NUL-terminated
 * and name a .version), a function a handle into it; a launch checks its
 * dimensions and that parameters are given, and runs nothing. */
typedef void *CUmodule;
typedef void *CUfunction;
static int modules, launches;
CUresult cuModuleLoadData(CUmodule *m, const void *image) {
	NEED_CTX;
	if (!image || !strstr((const char *)image, ".version")) return 218; /* CUDA_ERROR_INVALID_PTX */
	*m = strdup((const char *)image);
	modules++;
	return 0;
}
CUresult cuModuleUnload(CUmodule m) { NEED_CTX; if (!m) return 400; free(m); modules--; return 0; }
CUresult cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name) {
	NEED_CTX;
	if (!m || !name || !strstr((const char *)m, name)) return 500; /* CUDA_ERROR_NOT_FOUND */
	*f = m;
	return 0;
}
CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shared, CUstream s, void **params, void **extra) {
	NEED_CTX;
	(void)s;
	(void)shared;
	if (!f || !gx || !gy || !gz || !bx || !by || !bz || bx * by * bz > 1024 || extra || !params) return 1;
	launches++;
	return 0;
}
