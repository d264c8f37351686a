package cuda

import (
	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/runtime"
)

// gpuRuntime is what a Target on a GPU holds to run programs.
type gpuRuntime struct{}

var _ runtime.Backend = (*Target)(nil)

// Bind renders p's instructions, loads their kernels and binds them to
// the buffers.
func (t *Target) Bind(p *compile.Program, bufs []runtime.Span, scratch runtime.Span, comm runtime.Collective) (runtime.Bound, error) {
	if t.rt == nil {
		return nil, ErrPlanningOnly
	}
	return nil, ErrPlanningOnly
}

// CopyIn copies src from the host into dst on the GPU.
func (t *Target) CopyIn(dst runtime.Span, src []byte) error {
	if t.gpu == nil {
		return ErrPlanningOnly
	}
	return t.gpu.CopyHtoD(dst.Ptr(), src)
}

// CopyOut copies src on the GPU into the host's dst.
func (t *Target) CopyOut(dst []byte, src runtime.Span) error {
	if t.gpu == nil {
		return ErrPlanningOnly
	}
	return t.gpu.CopyDtoH(dst, src.Ptr())
}
