package kerneltest

import (
	"math"
	"testing"
)

// rowShapes are (rows, cols) pairs for the softmax family.
var rowShapes = [][2]int{{1, 1}, {1, 7}, {7, 33}, {33, 7}, {3, 1023}, {0, 5}, {4, 1}}

// logits returns rows×cols values in [-scale, scale), with row 0 shifted by
// +1000 when there is more than one row, so a kernel that does not subtract
// the row maximum overflows there.
func logits(seed uint64, rows, cols int, scale float64) []float32 {
	x := uniform(newRand(seed), rows*cols, -scale, scale)
	if rows > 1 {
		for c := 0; c < cols; c++ {
			x[c] += 1000
		}
	}
	return x
}

func testRows(t *testing.T, f, ref RowsFunc) {
	for i, s := range rowShapes {
		rows, cols := s[0], s[1]
		where := name("%dx%d", rows, cols)
		x := logits(uint64(10+i), rows, cols, 10)
		want := ref(make([]float32, len(x)), x, rows, cols)
		o, xs := newOut32(len(x)), clone(x)
		got := f(o.dst(), x, rows, cols)
		o.check(t, where, got)
		unchanged(t, where, "x", xs, x)
		compare(t, where, got, want, nil)
		f(x, x, rows, cols)
		compare(t, where+" in place", x, want, nil)
	}
}

// testRowsGrad runs f(dst, y, g) with y = fwd(x).
func testRowsGrad(t *testing.T, f, ref RowsGradFunc, fwd RowsFunc) {
	for i, s := range rowShapes {
		rows, cols := s[0], s[1]
		where := name("%dx%d", rows, cols)
		x := logits(uint64(30+i), rows, cols, 4)
		y := fwd(make([]float32, len(x)), x, rows, cols)
		g := uniform(newRand(uint64(50+i)), len(x), -1, 1)
		want := ref(make([]float32, len(x)), y, g, rows, cols)
		o, ys, gs := newOut32(len(x)), clone(y), clone(g)
		got := f(o.dst(), y, g, rows, cols)
		o.check(t, where, got)
		unchanged(t, where, "y", ys, y)
		unchanged(t, where, "g", gs, g)
		compare(t, where, got, want, nil)
		f(g, y, g, rows, cols)
		compare(t, where+" in place on g", g, want, nil)
	}
}

// labelsFor returns valid labels for rows×cols, with every third row made
// bad (alternately -1 and cols) when withBad is set.
func labelsFor(seed uint64, rows, cols int, withBad bool) []int32 {
	r := newRand(seed)
	l := make([]int32, rows)
	for i := range l {
		if cols > 0 {
			l[i] = int32(r.IntN(cols))
		}
		if withBad && i%3 == 1 {
			l[i] = -1
			if i%2 == 0 {
				l[i] = int32(cols)
			}
		}
	}
	return l
}

func testCrossEntropy(t *testing.T, f, ref CrossEntropyFunc) {
	for i, s := range rowShapes {
		rows, cols := s[0], s[1]
		for _, withBad := range []bool{false, true} {
			where := name("%dx%d bad labels=%v", rows, cols, withBad)
			x := logits(uint64(70+i), rows, cols, 10)
			labels := labelsFor(uint64(90+i), rows, cols, withBad)
			want := make([]float32, rows)
			wantBad := ref(want, x, labels, rows, cols)
			o, xs := newOut32(rows), clone(x)
			gotBad := f(o.dst(), x, labels, rows, cols)
			o.check(t, where, o.dst())
			unchanged(t, where, "logits", xs, x)
			if gotBad != wantBad {
				t.Errorf("%s: bad = %d, want %d", where, gotBad, wantBad)
			}
			compare(t, where, o.dst(), want, nil)
		}
	}
}

func testCrossEntropyGrad(t *testing.T, f, ref CrossEntropyGradFunc) {
	for i, s := range rowShapes {
		rows, cols := s[0], s[1]
		for _, withBad := range []bool{false, true} {
			where := name("%dx%d bad labels=%v", rows, cols, withBad)
			x := logits(uint64(110+i), rows, cols, 10)
			labels := labelsFor(uint64(130+i), rows, cols, withBad)
			g := uniform(newRand(uint64(150+i)), rows, -1, 1)
			want := make([]float32, len(x))
			wantBad := ref(want, x, labels, g, rows, cols)
			o, xs := newOut32(len(x)), clone(x)
			gotBad := f(o.dst(), x, labels, g, rows, cols)
			o.check(t, where, o.dst())
			unchanged(t, where, "logits", xs, x)
			if gotBad != wantBad {
				t.Errorf("%s: bad = %d, want %d", where, gotBad, wantBad)
			}
			compare(t, where, o.dst(), want, nil)
			if f(x, x, labels, g, rows, cols) != wantBad {
				t.Errorf("%s in place: bad differs", where)
			}
			compare(t, where+" in place on logits", x, want, nil)
		}
	}
	// A NaN gradient row is the documented answer for a bad label, not
	// garbage: check it is NaN everywhere in that row.
	x := logits(1, 3, 4, 1)
	dst := make([]float32, len(x))
	if bad := f(dst, x, []int32{0, 4, 1}, []float32{1, 1, 1}, 3, 4); bad != 1 {
		t.Errorf("label 4 of 4 classes: bad = %d, want 1", bad)
	}
	for c := 4; c < 8; c++ {
		if !math.IsNaN(float64(dst[c])) {
			t.Errorf("bad row element %d = %v, want NaN", c, dst[c])
		}
	}
}
