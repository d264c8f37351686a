//go:build purego || !amd64

package kernels

// Without the assembly every kernel runs its Go loops: the hooks of
// simd_export_amd64_test.go report and set nothing.

// SIMD is a setting of the assembly switches.
type SIMD struct {
	Elementwise  bool
	Window       bool
	ConvertLanes int
	// Transcendental: trans.go's vector paths; the softmax cross-entropy's
	// run on attention's row operations, Go here
	Transcendental bool
	Norm           bool
}

// MaxSIMD returns the widest setting this CPU and build run: none.
func MaxSIMD() SIMD { return SIMD{} }

// SetSIMD does nothing and returns the setting, all off.
func SetSIMD(s SIMD) (old SIMD) { return SIMD{} }
