//go:build !cuda

package cuda

// Built without the tag cuda: no CUDA library is ever loaded, and every
// entry point (Open, Device, DeviceCount, NewBLAS) fails with ErrNotBuilt.

func loadDriver() (driver, error) { return nil, ErrNotBuilt }

func loadBLAS() (blas, error) { return nil, ErrNotBuilt }

// Built reports whether this binary was built with -tags cuda.
const Built = false
