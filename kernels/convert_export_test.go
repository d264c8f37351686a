package kernels

// Test hooks for the 16-bit float casts of convert.go.

// ConvertLanes reports the widest vector tier (float32 lanes a vector: 16,
// 8 or 0 for none) this CPU and build have for the float16 and the bfloat16
// casts.
func ConvertLanes() (f16, bf16 int) { return convF16Max, convBF16Max }

// UseConvertLanes makes the casts run the widest tier of at most lanes (0:
// the Go loops only) and returns a function that restores the previous
// setting.
func UseConvertLanes(lanes int) (restore func()) {
	oldF, oldB := convF16Lanes, convBF16Lanes
	convF16Lanes, convBF16Lanes = min(lanes, convF16Max), min(lanes, convBF16Max)
	return func() { convF16Lanes, convBF16Lanes = oldF, oldB }
}
