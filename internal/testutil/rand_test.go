package testutil

import "testing"

func TestRandFloats(t *testing.T) {
	a := RandFloats(NewRand(7), 1000)
	b := RandFloats(NewRand(7), 1000)
	c := RandFloats(NewRand(8), 1000)
	same := 0
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("same seed, index %d: got %v and %v", i, a[i], b[i])
		}
		if a[i] < -1 || a[i] >= 1 {
			t.Fatalf("RandFloats[%d] = %v, want in [-1, 1)", i, a[i])
		}
		if a[i] == c[i] {
			same++
		}
	}
	if same > 10 {
		t.Errorf("seeds 7 and 8 agree on %d of 1000 values", same)
	}
	var neg int
	for _, v := range RandFloat32s(NewRand(1), 1000) {
		if v < -1 || v >= 1 {
			t.Fatalf("RandFloat32s value %v outside [-1, 1)", v)
		}
		if v < 0 {
			neg++
		}
	}
	if neg < 400 || neg > 600 {
		t.Errorf("%d of 1000 RandFloat32s values are negative, want about 500", neg)
	}
}
