package kernels_test

import (
	"testing"

	"github.com/headroom-ml/headroom/kernels/kerneltest"
)

// TestReferenceSuite runs the shared suite on the reference kernels. It
// cannot find a numerical disagreement (the reference is compared with
// itself), but it does check the suite's structural rules on them: dst is
// returned, nothing is written outside dst, inputs are left unchanged,
// in-place calls agree, and nothing allocates. The numerical checks of the
// reference are the independent tests in this package.
func TestReferenceSuite(t *testing.T) {
	kerneltest.Run(t, kerneltest.Reference())
}
