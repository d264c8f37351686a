package tensor

import (
	"fmt"
	"strconv"
	"strings"
)

// MaxRank is the largest rank kernels index without allocating.
const MaxRank = 8

// Shape lists dimension sizes, outermost first. A nil or empty Shape is a scalar.
type Shape []int

// Rank returns the number of dimensions.
func (s Shape) Rank() int { return len(s) }

// Size returns the number of elements (1 for a scalar).
func (s Shape) Size() int {
	n := 1
	for _, d := range s {
		n *= d
	}
	return n
}

// Equal reports whether s and o have the same dimensions.
func (s Shape) Equal(o Shape) bool {
	if len(s) != len(o) {
		return false
	}
	for i := range s {
		if s[i] != o[i] {
			return false
		}
	}
	return true
}

// Clone returns a copy of s that does not share memory with it.
func (s Shape) Clone() Shape {
	if s == nil {
		return nil
	}
	return append(Shape{}, s...)
}

// String formats s as "[2, 3]".
func (s Shape) String() string {
	var b strings.Builder
	b.WriteByte('[')
	for i, d := range s {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(d))
	}
	b.WriteByte(']')
	return b.String()
}

// Validate returns an error if a dimension is negative or the rank exceeds MaxRank.
func (s Shape) Validate() error {
	if len(s) > MaxRank {
		return fmt.Errorf("tensor: rank %d exceeds the maximum %d", len(s), MaxRank)
	}
	for i, d := range s {
		if d < 0 {
			return fmt.Errorf("tensor: dimension %d of %v is negative", i, s)
		}
	}
	return nil
}

// Strides returns the row-major element strides of s.
func Strides(s Shape) []int {
	st := make([]int, len(s))
	n := 1
	for i := len(s) - 1; i >= 0; i-- {
		st[i] = n
		n *= s[i]
	}
	return st
}

// Broadcast returns the shape that a and b broadcast to under NumPy's rule,
// or an error naming both shapes.
func Broadcast(a, b Shape) (Shape, error) {
	n := max(len(a), len(b))
	out := make(Shape, n)
	for i := 0; i < n; i++ {
		da, db := 1, 1
		if j := len(a) - n + i; j >= 0 {
			da = a[j]
		}
		if j := len(b) - n + i; j >= 0 {
			db = b[j]
		}
		switch {
		case da == db:
			out[i] = da
		case da == 1:
			out[i] = db
		case db == 1:
			out[i] = da
		default:
			return nil, fmt.Errorf("tensor: shapes %v and %v do not broadcast (dimension %d: %d vs %d)", a, b, i, da, db)
		}
	}
	return out, nil
}

// CanBroadcastTo reports whether from broadcasts to to (to is the larger shape).
func CanBroadcastTo(from, to Shape) bool {
	if len(from) > len(to) {
		return false
	}
	off := len(to) - len(from)
	for i, d := range from {
		if d != 1 && d != to[off+i] {
			return false
		}
	}
	return true
}

// BroadcastStrides returns, for each dimension of out, the element stride in a
// row-major tensor of shape in that broadcasts to out: 0 where in has size 1
// (or lacks the dimension), its own stride otherwise. It panics if in does not
// broadcast to out.
func BroadcastStrides(in, out Shape) []int {
	if !CanBroadcastTo(in, out) {
		panic(fmt.Sprintf("tensor: %v does not broadcast to %v", in, out))
	}
	st := make([]int, len(out))
	inSt := Strides(in)
	off := len(out) - len(in)
	for i := range out {
		j := i - off
		if j < 0 || in[j] == 1 {
			continue
		}
		st[i] = inSt[j]
	}
	return st
}

// ReducedAxes returns the axes of out along which in was broadcast (where in
// has size 1 or lacks the dimension and out's size is not 1): the axes a
// gradient must be summed over to return to in's shape.
func ReducedAxes(in, out Shape) []int {
	var axes []int
	off := len(out) - len(in)
	for i := range out {
		j := i - off
		if (j < 0 || in[j] == 1) && out[i] != 1 {
			axes = append(axes, i)
		}
	}
	return axes
}
