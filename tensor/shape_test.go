package tensor

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func TestBroadcast(t *testing.T) {
	for _, tc := range []struct {
		a, b Shape
		want Shape // nil: an error
	}{
		{Shape{2, 3}, Shape{3}, Shape{2, 3}},
		{Shape{3}, Shape{2, 3}, Shape{2, 3}},
		{Shape{2, 1}, Shape{1, 3}, Shape{2, 3}},
		{Shape{5, 1, 4}, Shape{3, 1}, Shape{5, 3, 4}},
		{Shape{}, Shape{4}, Shape{4}},
		{nil, nil, Shape{}},
		{Shape{1}, Shape{}, Shape{1}},
		{Shape{0}, Shape{1}, Shape{0}},
		{Shape{2, 0}, Shape{2, 1}, Shape{2, 0}},
		{Shape{8, 1, 6, 1}, Shape{7, 1, 5}, Shape{8, 7, 6, 5}},
		{Shape{2, 3}, Shape{2}, nil},
		{Shape{0}, Shape{2}, nil},
		{Shape{4, 3}, Shape{2, 4, 2}, nil},
		{Shape{2, 1}, Shape{8, 4, 3}, nil},
	} {
		t.Run(tc.a.String()+"x"+tc.b.String(), func(t *testing.T) {
			got, err := Broadcast(tc.a, tc.b)
			if tc.want == nil {
				if err == nil {
					t.Fatalf("Broadcast(%v, %v) = %v, want an error", tc.a, tc.b, got)
				}
				for _, s := range []string{"tensor: ", tc.a.String(), tc.b.String()} {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q, want it to contain %q", err, s)
					}
				}
				return
			}
			if err != nil || !got.Equal(tc.want) {
				t.Errorf("Broadcast(%v, %v) = %v, %v; want %v", tc.a, tc.b, got, err, tc.want)
			}
			if !CanBroadcastTo(tc.a, got) || !CanBroadcastTo(tc.b, got) {
				t.Errorf("CanBroadcastTo says %v or %v does not broadcast to their broadcast %v", tc.a, tc.b, got)
			}
		})
	}
}

func TestCanBroadcastTo(t *testing.T) {
	for _, tc := range []struct {
		from, to Shape
		want     bool
	}{
		{Shape{3}, Shape{2, 3}, true},
		{Shape{1, 3}, Shape{2, 3}, true},
		{Shape{}, Shape{2, 3}, true},
		{Shape{2, 3}, Shape{3}, false},
		{Shape{2}, Shape{2, 3}, false},
		{Shape{2, 3}, Shape{1, 3}, false},
	} {
		if got := CanBroadcastTo(tc.from, tc.to); got != tc.want {
			t.Errorf("CanBroadcastTo(%v, %v) = %v, want %v", tc.from, tc.to, got, tc.want)
		}
	}
}

func TestStrides(t *testing.T) {
	for _, tc := range []struct {
		s    Shape
		want []int
	}{
		{Shape{2, 3, 4}, []int{12, 4, 1}},
		{Shape{5}, []int{1}},
		{Shape{}, []int{}},
		{Shape{2, 0, 3}, []int{0, 3, 1}},
		{Shape{1, 1, 7}, []int{7, 7, 1}},
	} {
		if got := Strides(tc.s); !slices.Equal(got, tc.want) {
			t.Errorf("Strides(%v) = %v, want %v", tc.s, got, tc.want)
		}
	}
}

func TestBroadcastStrides(t *testing.T) {
	for _, tc := range []struct {
		in, out Shape
		want    []int
	}{
		{Shape{3}, Shape{2, 3}, []int{0, 1}},
		{Shape{2, 1}, Shape{2, 3}, []int{1, 0}},
		{Shape{}, Shape{2, 3}, []int{0, 0}},
		{Shape{3, 1}, Shape{4, 3, 5}, []int{0, 1, 0}},
		{Shape{2, 3}, Shape{2, 3}, []int{3, 1}},
		{Shape{1, 1}, Shape{1, 1}, []int{0, 0}},
	} {
		if got := BroadcastStrides(tc.in, tc.out); !slices.Equal(got, tc.want) {
			t.Errorf("BroadcastStrides(%v, %v) = %v, want %v", tc.in, tc.out, got, tc.want)
		}
	}
	defer func() {
		if msg, _ := recover().(string); !strings.HasPrefix(msg, "tensor: ") {
			t.Errorf("BroadcastStrides([2], [3]) panicked with %q, want a \"tensor: ...\" panic", msg)
		}
	}()
	BroadcastStrides(Shape{2}, Shape{3})
}

// TestBroadcastStridesIndexing checks BroadcastStrides against the definition
// of broadcasting on random shapes: element idx of out reads element
// idx' of in, where idx'[j] = idx[j+off] where in has that dimension > 1 and
// 0 elsewhere.
func TestBroadcastStridesIndexing(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 200; trial++ {
		out := make(Shape, rng.IntN(5))
		for i := range out {
			out[i] = 1 + rng.IntN(4)
		}
		in := out[rng.IntN(len(out)+1):].Clone()
		for i := range in {
			if rng.IntN(2) == 0 {
				in[i] = 1
			}
		}
		st, inSt := BroadcastStrides(in, out), Strides(in)
		off := len(out) - len(in)
		idx := make([]int, len(out))
		for n := 0; n < out.Size(); n++ {
			got, want := 0, 0
			for j := range out {
				got += idx[j] * st[j]
				if k := j - off; k >= 0 && in[k] > 1 {
					want += idx[j] * inSt[k]
				}
			}
			if got != want {
				t.Fatalf("in %v out %v index %v: strided offset %d, want %d", in, out, idx, got, want)
			}
			for j := len(idx) - 1; j >= 0; j-- { // next row-major index
				if idx[j]++; idx[j] < out[j] {
					break
				}
				idx[j] = 0
			}
		}
	}
}

func TestReducedAxes(t *testing.T) {
	for _, tc := range []struct {
		in, out Shape
		want    []int
	}{
		{Shape{3}, Shape{2, 3}, []int{0}},
		{Shape{2, 1}, Shape{2, 3}, []int{1}},
		{Shape{}, Shape{2, 3}, []int{0, 1}},
		{Shape{1, 1}, Shape{1, 4}, []int{1}},
		{Shape{1, 3, 1}, Shape{5, 4, 3, 2}, []int{0, 1, 3}},
		{Shape{2, 3}, Shape{2, 3}, nil},
		{Shape{1}, Shape{1}, nil},
		{Shape{}, Shape{}, nil},
	} {
		if got := ReducedAxes(tc.in, tc.out); !slices.Equal(got, tc.want) {
			t.Errorf("ReducedAxes(%v, %v) = %v, want %v", tc.in, tc.out, got, tc.want)
		}
	}
}

func TestShape(t *testing.T) {
	s := Shape{2, 3, 4}
	if s.Rank() != 3 || s.Size() != 24 || s.String() != "[2, 3, 4]" {
		t.Errorf("Rank, Size, String = %d, %d, %q; want 3, 24, \"[2, 3, 4]\"", s.Rank(), s.Size(), s.String())
	}
	if got := (Shape{}).Size(); got != 1 {
		t.Errorf("scalar Size() = %d, want 1", got)
	}
	if got := (Shape{3, 0}).Size(); got != 0 {
		t.Errorf("Shape{3, 0}.Size() = %d, want 0", got)
	}
	c := s.Clone()
	c[0] = 9
	if s[0] != 2 {
		t.Errorf("Clone shares memory with the original")
	}
	if Shape(nil).Clone() != nil {
		t.Errorf("Clone of nil is not nil")
	}
	if s.Equal(Shape{2, 3}) || !s.Equal(Shape{2, 3, 4}) || !Shape(nil).Equal(Shape{}) {
		t.Errorf("Equal disagrees with element-wise comparison")
	}
	for _, tc := range []struct {
		s  Shape
		ok bool
	}{
		{Shape{}, true},
		{Shape{1, 2, 3, 4, 5, 6, 7, 8}, true},
		{Shape{1, 2, 3, 4, 5, 6, 7, 8, 9}, false},
		{Shape{2, -1}, false},
		{Shape{0}, true},
	} {
		if err := tc.s.Validate(); (err == nil) != tc.ok {
			t.Errorf("%v.Validate() = %v, want ok=%v", tc.s, err, tc.ok)
		}
	}
}
