package kernels

// DropoutMask fills dst with 0 (probability rate) or 1/(1-rate): inverted
// dropout. Element i's draw is a pure function of (seed, step, i): a
// counter-based generator (SplitMix64's finalizer over a Weyl sequence, as
// in Steele, Lea and Flood, "Fast splittable pseudorandom number
// generators", OOPSLA 2014), so a step can be replayed exactly from its
// step number.
func DropoutMask[T Float](dst []T, seed uint64, step int64, rate float64) []T {
	keep := T(0)
	if rate < 1 {
		keep = T(1 / (1 - rate))
	}
	// threshold on the top 53 bits: u = bits/2^53 in [0, 1), dropped when u < rate
	threshold := uint64(rate * (1 << 53))
	base := mix64(seed ^ mix64(uint64(step)+0x9e3779b97f4a7c15))
	for i := range dst {
		if mix64(base+uint64(i)*0x9e3779b97f4a7c15)>>11 < threshold {
			dst[i] = 0
		} else {
			dst[i] = keep
		}
	}
	return dst
}

// mix64 is SplitMix64's output function.
func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
