package profile

import (
	"fmt"
	"strings"

	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/mem"
)

// timeline is a plan's memory over its step: the persistent bytes of each
// category (live for the whole step) and, for each instruction t in
// [0, Instrs), the arena bytes of each category live during t (buffers with
// Start <= t <= End). Counters, the HTML plot and the tests read it.
type timeline struct {
	persistent [mem.NumCategories]int64
	arena      [][mem.NumCategories]int64 // [Instrs]
}

func newTimeline(p *compile.Plan) (*timeline, error) {
	if err := checkPlan(p); err != nil {
		return nil, err
	}
	tl := &timeline{arena: make([][mem.NumCategories]int64, p.Instrs)}
	// delta[t] is what starts at t minus what ended at t-1, by category.
	delta := make([][mem.NumCategories]int64, p.Instrs+1)
	for i := range p.Buffers {
		b := &p.Buffers[i]
		if b.Kind != compile.KindArena {
			tl.persistent[b.Category] += b.Bytes
			continue
		}
		delta[b.Start][b.Category] += b.Bytes
		delta[b.End+1][b.Category] -= b.Bytes
	}
	var live [mem.NumCategories]int64
	for t := range tl.arena {
		for c := range live {
			live[c] += delta[t][c]
		}
		tl.arena[t] = live
	}
	return tl, nil
}

// total returns the bytes live during instruction t, persistent included
// (t < 0 or past the end: persistent bytes only).
func (tl *timeline) total(t int) int64 {
	var s int64
	for c := range tl.persistent {
		s += tl.persistent[c]
		if t >= 0 && t < len(tl.arena) {
			s += tl.arena[t][c]
		}
	}
	return s
}

// used returns the categories with bytes at some instruction, in report order.
func (tl *timeline) used() []mem.Category {
	var out []mem.Category
	for c := mem.Category(0); c < mem.NumCategories; c++ {
		seen := tl.persistent[c] != 0
		for t := 0; !seen && t < len(tl.arena); t++ {
			seen = tl.arena[t][c] != 0
		}
		if seen {
			out = append(out, c)
		}
	}
	return out
}

// checkPlan rejects what the exporters cannot draw: a nil plan, a category
// out of range, an arena buffer whose lifetime lies outside the program.
func checkPlan(p *compile.Plan) error {
	if p == nil {
		return fmt.Errorf("profile: nil plan")
	}
	if p.Instrs < 0 {
		return fmt.Errorf("profile: plan has %d instructions", p.Instrs)
	}
	for i := range p.Buffers {
		b := &p.Buffers[i]
		if b.Category >= mem.NumCategories {
			return fmt.Errorf("profile: buffer b%d (%s) has %s", b.ID, b.Owner, b.Category)
		}
		if b.Bytes < 0 {
			return fmt.Errorf("profile: buffer b%d (%s) has %d bytes", b.ID, b.Owner, b.Bytes)
		}
		if b.Kind == compile.KindArena && (b.Start < 0 || b.End < b.Start || b.End >= p.Instrs) {
			return fmt.Errorf("profile: arena buffer b%d (%s) lives [%d,%d] outside the %d instructions", b.ID, b.Owner, b.Start, b.End, p.Instrs)
		}
	}
	return nil
}

// Layer returns the model layer an owner belongs to: the first element of
// its scope path, looking through the "grad/" scope autodiff adds and the
// "/workspace" suffix of scratch buffers. "conv2d/conv2d", "conv2d/kernel",
// "conv2d/kernel/m" and "grad/conv2d/conv2d/conv2d_backprop_filter" all
// belong to "conv2d"; an owner outside any scope ("reduce_mean", "x") is
// its own layer.
func Layer(owner string) string {
	s := owner
	for strings.HasPrefix(s, "grad/") {
		s = s[len("grad/"):]
	}
	if i := strings.IndexByte(s, '/'); i > 0 {
		return s[:i]
	}
	if s == "" {
		return owner
	}
	return s
}

// shapeString prints a buffer's value as the plan does: "float32[32, 10]".
func shapeString(b *compile.Buffer) string {
	return fmt.Sprintf("%s%v", b.DType, b.Shape)
}
