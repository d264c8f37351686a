// Package openblas binds OpenBLAS's cblas_sgemm through cgo, for the
// openblas build tag of package kernels, which routes Sgemm to it for
// side-by-side comparison. Without the tag (and cgo) the package is empty.
// It lives apart from package kernels because a cgo package cannot hold Go
// assembly. It needs Debian's libopenblas-dev (apt-get install
// libopenblas-dev).
package openblas
