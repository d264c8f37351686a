package tensor

import (
	"math"

	"github.com/x448/float16"
)

// F16 is an IEEE 754 half-precision number in its bit pattern.
type F16 uint16

// BF16 is a bfloat16 number (the top 16 bits of a float32) in its bit pattern.
type BF16 uint16

// ToFloat16 rounds f to the nearest half-precision number (ties to even).
func ToFloat16(f float32) F16 { return F16(float16.Fromfloat32(f)) }

// Float32 widens h exactly.
func (h F16) Float32() float32 { return float16.Frombits(uint16(h)).Float32() }

// ToBFloat16 rounds f to the nearest bfloat16 (ties to even); NaN stays a
// quiet NaN with its sign.
func ToBFloat16(f float32) BF16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 { // NaN: keep it NaN after truncation
		return BF16(u>>16 | 0x0040)
	}
	// Round to nearest even: add 0x7fff plus the lowest kept bit.
	u += 0x7fff + (u>>16)&1
	return BF16(u >> 16)
}

// Float32 widens b exactly.
func (b BF16) Float32() float32 { return math.Float32frombits(uint32(b) << 16) }
