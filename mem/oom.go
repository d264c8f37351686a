package mem

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// OOMError reports a request that a budget or a device could not hold. It
// says what was asked for, what was already held and by whom, and what might
// fit. Use errors.As(err, &oom) with oom of type *OOMError.
type OOMError struct {
	Ledger      string   // the ledger or device that refused
	Category    Category // NumCategories when the request spans categories (a plan)
	Owner       string   // who asked
	Request     int64    // bytes asked for
	Budget      int64    // the limit (<= 0: none; the device's capacity refused)
	Live        int64    // bytes held when it was refused
	LargestFree int64    // largest free block of the allocator; -1 if unknown
	Totals      [NumCategories]int64
	Top         []Entry // largest live owners
	// Notes say more about the request, one line each (one process's share
	// of a data-parallel run: its model state, its gather buffers).
	Notes    []string
	Remedies []string // what would fit, filled in by the planner when it knows
}

func (e *OOMError) Error() string {
	var b strings.Builder
	if e.Category < NumCategories {
		fmt.Fprintf(&b, "out of memory on %s: %s (%s) needs %s", e.Ledger, e.Owner, e.Category, FormatBytes(e.Request))
	} else { // a request that spans categories: a whole plan
		fmt.Fprintf(&b, "out of memory on %s: %s needs %s", e.Ledger, e.Owner, FormatBytes(e.Request))
	}
	if e.Budget > 0 {
		fmt.Fprintf(&b, "; budget %s, %s already held, %s free", FormatBytes(e.Budget), FormatBytes(e.Live), FormatBytes(max(0, e.Budget-e.Live)))
	} else {
		fmt.Fprintf(&b, "; %s already held", FormatBytes(e.Live))
	}
	if e.LargestFree >= 0 {
		fmt.Fprintf(&b, ", largest free block %s", FormatBytes(e.LargestFree))
	}
	if e.Totals != ([NumCategories]int64{}) {
		b.WriteString("\n  by category:")
		for c := Category(0); c < NumCategories; c++ {
			if e.Totals[c] != 0 {
				fmt.Fprintf(&b, " %s=%s", c, FormatBytes(e.Totals[c]))
			}
		}
	}
	if len(e.Top) > 0 {
		b.WriteString("\n  largest live buffers:")
		for _, t := range e.Top {
			fmt.Fprintf(&b, "\n    %10s  %-10s %s", FormatBytes(t.Bytes), t.Category, t.Owner)
			if t.Site != "" {
				fmt.Fprintf(&b, " (%s)", t.Site)
			}
		}
	}
	for _, n := range e.Notes {
		b.WriteString("\n  ")
		b.WriteString(n)
	}
	for _, r := range e.Remedies {
		b.WriteString("\n  remedy: ")
		b.WriteString(r)
	}
	return b.String()
}

// FormatBytes formats n in binary units ("1.50 MiB", "512 B").
func FormatBytes(n int64) string {
	const unit = 1024
	if n < unit && n > -unit {
		return fmt.Sprintf("%d B", n)
	}
	f := float64(n)
	for _, u := range []string{"KiB", "MiB", "GiB", "TiB"} {
		f /= unit
		if f < unit && f > -unit {
			return fmt.Sprintf("%.2f %s", f, u)
		}
	}
	return fmt.Sprintf("%.2f PiB", f/unit)
}

// ParseBytes parses a size such as "512MiB", "1.5GiB", "64KB" or "1000".
// Binary (KiB, MiB, GiB, TiB; K, M, G) and decimal (KB, MB, GB, TB) units are
// accepted, with optional space before the unit. The number is plain decimal
// (digits, an optional fraction and exponent); the result is rounded to the
// nearest byte and must fit in an int64.
func ParseBytes(s string) (int64, error) {
	bad := func(why string) (int64, error) {
		return 0, fmt.Errorf("mem: cannot parse size %q: %s (want e.g. 512MiB, 2GiB, 1000000)", s, why)
	}
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range byteUnits {
		if strings.HasSuffix(t, u.suf) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suf)), u.m
			break
		}
	}
	if t == "" {
		return bad("no number")
	}
	// strconv.ParseFloat also takes "NaN", "Inf", hex and underscores; a
	// size is plain decimal.
	for i := 0; i < len(t); i++ {
		if !strings.ContainsRune("0123456789.eE+-", rune(t[i])) || (i == 0 && (t[i] < '0' || t[i] > '9') && t[i] != '.') {
			return bad("not a decimal number")
		}
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil {
		return bad("not a decimal number")
	}
	v := math.Round(f * float64(mult))
	if v >= math.MaxInt64 { // float64(MaxInt64) is 2^63
		return bad("too large")
	}
	return int64(v), nil
}

var byteUnits = []struct {
	suf string
	m   int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"B", 1},
}
