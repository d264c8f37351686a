package mem

import (
	"strings"
	"testing"
)

func TestParseBytes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true},
		{"1000", 1000, true},
		{"512MiB", 512 << 20, true},
		{"1.5GiB", 3 << 29, true},
		{"64KB", 64000, true},
		{"64KiB", 64 << 10, true},
		{"2 GiB", 2 << 30, true},
		{"  7TiB ", 7 << 40, true},
		{"3TB", 3e12, true},
		{"1MB", 1e6, true},
		{"0.3MB", 300000, true},
		{"1.50 KiB", 1536, true},
		{"8K", 8 << 10, true},
		{"8M", 8 << 20, true},
		{"1G", 1 << 30, true},
		{"100B", 100, true},
		{".5KiB", 512, true},
		{"1e3", 1000, true},
		{"1.5e3KB", 1500000, true},
		{"", 0, false},
		{"MiB", 0, false},
		{"-1", 0, false},
		{"-1MiB", 0, false},
		{"+5", 0, false},
		{"NaN", 0, false},
		{"Inf", 0, false},
		{"infMiB", 0, false},
		{"0x10", 0, false},
		{"1_000", 0, false},
		{"5 5", 0, false},
		{"12abc", 0, false},
		{"1e30", 0, false},
		{"9223372036854775808", 0, false},
		{"8EiB", 0, false},
		{".", 0, false},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseBytes(tc.in)
			if tc.ok && (err != nil || got != tc.want) {
				t.Errorf("ParseBytes(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
			}
			if !tc.ok {
				if err == nil {
					t.Errorf("ParseBytes(%q) = %d, want an error", tc.in, got)
				} else if !strings.HasPrefix(err.Error(), "mem: ") || !strings.Contains(err.Error(), tc.in) {
					t.Errorf("ParseBytes(%q) error %q, want a \"mem: \" error quoting the input", tc.in, err)
				}
			}
		})
	}
}

func TestFormatBytes(t *testing.T) {
	for _, tc := range []struct {
		in   int64
		want string
	}{
		{0, "0 B"},
		{512, "512 B"},
		{1023, "1023 B"},
		{1024, "1.00 KiB"},
		{1536, "1.50 KiB"},
		{64 << 20, "64.00 MiB"},
		{3 << 29, "1.50 GiB"},
		{5 << 40, "5.00 TiB"},
		{2 << 50, "2.00 PiB"},
		{-2048, "-2.00 KiB"},
		{-5, "-5 B"},
	} {
		if got := FormatBytes(tc.in); got != tc.want {
			t.Errorf("FormatBytes(%d) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// FuzzParseBytes checks that ParseBytes never panics, never returns a
// negative size, and that FormatBytes of a whole number of KiB, MiB, GiB or
// TiB (below 1024 of the unit, so it prints exactly) parses back to itself.
func FuzzParseBytes(f *testing.F) {
	for _, s := range []string{"512MiB", "1.5GiB", "64KB", "1000", "", "NaN", "-1", "1e400", "0x1p3", "7 TiB", ".5K", "1e-3B"} {
		f.Add(s, uint16(1), uint8(1))
	}
	f.Add("", uint16(1023), uint8(3))
	f.Fuzz(func(t *testing.T, s string, k uint16, unit uint8) {
		if n, err := ParseBytes(s); err == nil && n < 0 {
			t.Errorf("ParseBytes(%q) = %d, want a size >= 0", s, n)
		}
		whole := int64(k%1023+1) << (10 * (1 + int64(unit)%4)) // 1..1023 KiB, MiB, GiB or TiB
		str := FormatBytes(whole)
		got, err := ParseBytes(str)
		if err != nil || got != whole {
			t.Errorf("ParseBytes(FormatBytes(%d) = %q) = %d, %v; want %d", whole, str, got, err, whole)
		}
	})
}
