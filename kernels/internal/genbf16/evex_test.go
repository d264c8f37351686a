package main

import (
	"fmt"
	"testing"
)

// TestEncodeVDPBF16PS checks the encoder against GNU as: each want is
// objdump -d of "vdpbf16ps %zmm<src2>,%zmm<src1>,%zmm<dst>" assembled by as
// (binutils 2.40), so every register bank (0-7, 8-15, 16-23, 24-31) appears
// in every operand position.
func TestEncodeVDPBF16PS(t *testing.T) {
	tests := []struct {
		dst, src1, src2 int
		want            [6]byte
	}{
		{0, 1, 2, [6]byte{0x62, 0xf2, 0x76, 0x48, 0x52, 0xc2}},
		{0, 24, 26, [6]byte{0x62, 0x92, 0x3e, 0x40, 0x52, 0xc2}},
		{23, 25, 31, [6]byte{0x62, 0x82, 0x36, 0x40, 0x52, 0xff}},
		{9, 16, 8, [6]byte{0x62, 0x52, 0x7e, 0x40, 0x52, 0xc8}},
		{31, 9, 17, [6]byte{0x62, 0x22, 0x36, 0x48, 0x52, 0xf9}},
		{12, 7, 15, [6]byte{0x62, 0x52, 0x46, 0x48, 0x52, 0xe7}},
		{16, 29, 30, [6]byte{0x62, 0x82, 0x16, 0x40, 0x52, 0xc6}},
		{24, 31, 0, [6]byte{0x62, 0x62, 0x06, 0x40, 0x52, 0xc0}},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("zmm%d,zmm%d,zmm%d", tc.dst, tc.src1, tc.src2), func(t *testing.T) {
			if got := vdpbf16ps.encode512(tc.dst, tc.src1, tc.src2); got != tc.want {
				t.Errorf("got % x, want % x", got, tc.want)
			}
		})
	}
}

// TestEncodeRange checks that a register beyond zmm31 is refused.
func TestEncodeRange(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Errorf("encode512(32, 0, 0): got no panic, want one")
		}
	}()
	vdpbf16ps.encode512(32, 0, 0)
}
