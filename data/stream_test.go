package data

import (
	"context"
	"math"
	"testing"

	"github.com/headroom-ml/headroom/tensor"
)

// A stream holds a seeded fifth out by content, reads every other example
// once per pass in a pass-specific order, and feeds pixels scaled.
func TestStream(t *testing.T) {
	const n, d = 200, 3
	px := make([]byte, n*d)
	var ys []int64
	for i := 0; i < n; i++ {
		px[i*d], px[i*d+1], px[i*d+2] = byte(i), byte(i>>8), 7
		ys = append(ys, int64(i%5))
	}
	x := writeFile(t, "x.npy", npyFile("|u1", []int{n, d}, px))
	y := writeFile(t, "y.npy", npyFile("<i8", []int{n}, le64(ys...)))
	s := &Stream{Source: &Source{Path: x, Labels: y, Preprocessing: Preprocessing{Scale: 0.5}}, Split: 0.2, Seed: 3}
	if err := s.Scan(); err != nil {
		t.Fatal(err)
	}
	if s.Val == nil || s.N+s.Val.N != n || s.Val.N < 20 || s.Val.N > 60 || s.Source.Classes != 5 || !s.Shape.Equal(tensor.Shape{d}) {
		t.Fatalf("scan: %d training, validation %v, classes %d, shape %v; want about 160 and 40 of 200, 5 classes", s.N, s.Val, s.Source.Classes, s.Shape)
	}
	held := map[int]bool{}
	for i := 0; i < s.Val.N; i++ {
		held[int(s.Val.Pixels[i*d])+int(s.Val.Pixels[i*d+1])<<8] = true
	}
	ds := s.Dataset(16, 64)
	var orders [2][]int
	for pass := range orders {
		seen := map[int]bool{}
		for b, err := range ds.All(context.Background(), Config{}) {
			if err != nil {
				t.Fatal(err)
			}
			xs, yv := b.X.Float32s(), b.Y.Int32s()
			for r := 0; r < b.Size; r++ {
				i := int(xs[r*d]*2) + int(xs[r*d+1]*2)<<8
				if xs[r*d+2] != 3.5 || int(yv[r]) != i%5 || held[i] || seen[i] {
					t.Fatalf("pass %d: example %v label %d: want scaled pixels, its label, not held out, once", pass, xs[r*d:r*d+d], yv[r])
				}
				seen[i] = true
				orders[pass] = append(orders[pass], i)
			}
		}
		if len(seen) != s.N {
			t.Fatalf("pass %d: %d examples, want %d", pass, len(seen), s.N)
		}
	}
	same := 0
	for i := range orders[0] {
		if orders[0][i] == orders[1][i] {
			same++
		}
	}
	if same > s.N/4 {
		t.Errorf("two passes agree in %d of %d places: want a fresh shuffle each pass", same, s.N)
	}
	if est, err := s.Source.EstimateBytes(); err != nil || math.Abs(float64(est-int64(n*d))) > 200 {
		t.Errorf("EstimateBytes: %d, %v; want about %d (the file's size)", est, err, n*d)
	}
}
