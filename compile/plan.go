package compile

import (
	"fmt"
	"sort"
	"strings"

	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/tensor"
)

// BufferKind says where a buffer lives.
type BufferKind uint8

// The kinds.
const (
	KindArena    BufferKind = iota // a temporary at an offset in the step's arena
	KindInput                      // fed before each step
	KindVariable                   // persistent state shared by programs
	KindConstant                   // a value known at compile time
	KindOutput                     // a value kept readable after the step
	// KindScratch is the Target's persistent scratch (the host's
	// matrix-product packing buffers, one set per thread): one buffer per
	// engine, shared by every program on it, as large as the largest need.
	KindScratch
)

func (k BufferKind) String() string {
	return [...]string{"arena", "input", "variable", "constant", "output", "scratch"}[k]
}

// Buffer is one planned buffer. Nodes that share it (views, in-place
// results, an assigned value written into its variable) are listed in Nodes.
type Buffer struct {
	ID       int
	Kind     BufferKind
	Category mem.Category
	Name     string // inputs, variables, outputs
	Owner    string // the node that defines it, e.g. "dense1/matmul"
	Site     string // the user's file:line that built that node
	DType    tensor.DType
	Shape    tensor.Shape
	Bytes    int64 // mem.Align of the value's size
	Offset   int64 // in the arena; -1 for other kinds
	Start    int   // arena: first instruction that writes it
	End      int   // arena: last instruction that reads it
	Nodes    []int

	value tensor.Tensor // constants
}

// Value returns a constant buffer's value.
func (b *Buffer) Value() tensor.Tensor { return b.value }

// Plan places every buffer of a program. See the package documentation.
type Plan struct {
	Buffers    []Buffer
	Instrs     int
	ArenaBytes int64
	LowerBound int64
	PeakInstr  int // the instruction at which the most arena bytes are live
	// ArenaShare splits ArenaBytes by the category of the buffers live at
	// PeakInstr (activation, grad), the rest counted as workspace.
	ArenaShare [mem.NumCategories]int64
	Totals     [mem.NumCategories]int64
	Peak       int64
	// Scratch is the bytes of the Target's persistent scratch the program
	// needs (its KindScratch buffer; counted in Peak and as workspace).
	Scratch int64
}

// addScratch adds the Target's persistent scratch of bytes (> 0) to p.
func (p *Plan) addScratch(target string, bytes int64) {
	b := Buffer{ID: len(p.Buffers), Kind: KindScratch, Category: mem.Workspace, Name: "scratch:" + target,
		Owner: target + "/scratch", DType: tensor.Uint8, Shape: tensor.Shape{int(bytes)}, Bytes: mem.Align(bytes), Offset: -1}
	p.Buffers = append(p.Buffers, b)
	p.Scratch = b.Bytes
	p.Totals[mem.Workspace] += b.Bytes
	p.Peak += b.Bytes
}

func newPlan(bufs []Buffer, arena []int, ninstr int) *Plan {
	p := &Plan{Buffers: bufs, Instrs: ninstr}
	sizes := make([]int64, len(arena))
	start := make([]int, len(arena))
	end := make([]int, len(arena))
	for i, b := range arena {
		sizes[i], start[i], end[i] = bufs[b].Bytes, bufs[b].Start, bufs[b].End
	}
	offsets, total := PlaceGreedyBySize(sizes, start, end)
	for i, b := range arena {
		bufs[b].Offset = offsets[i]
	}
	p.ArenaBytes = total
	p.LowerBound, p.PeakInstr = LowerBound(sizes, start, end, ninstr)
	for _, b := range bufs {
		if b.Kind != KindArena {
			p.Totals[b.Category] += b.Bytes
			p.Peak += b.Bytes
		} else if b.Category != mem.Workspace && b.Start <= p.PeakInstr && p.PeakInstr <= b.End {
			p.Totals[b.Category] += b.Bytes
			p.ArenaShare[b.Category] += b.Bytes
		}
	}
	p.ArenaShare[mem.Workspace] = p.ArenaBytes - p.ArenaShare[mem.Activation] - p.ArenaShare[mem.Grad]
	p.Totals[mem.Workspace] += p.ArenaShare[mem.Workspace]
	p.Peak += p.ArenaBytes
	return p
}

// PlaceGreedyBySize assigns arena offsets to buffers with the given sizes
// and lifetimes [start, end] (inclusive instruction indices): in decreasing
// size (ties: earlier start first), each buffer takes the smallest gap that
// holds it between the buffers already placed whose lifetimes overlap its
// own, or goes above them all. It returns the offsets and the arena size.
// This is the "greedy by size" strategy of TensorFlow Lite's
// simple_memory_arena / greedy_memory_planner.
func PlaceGreedyBySize(sizes []int64, start, end []int) ([]int64, int64) {
	order := make([]int, len(sizes))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool {
		a, b := order[i], order[j]
		if sizes[a] != sizes[b] {
			return sizes[a] > sizes[b]
		}
		return start[a] < start[b]
	})
	offsets := make([]int64, len(sizes))
	var placed []int // sorted by offset
	var total int64
	for _, i := range order {
		best, bestGap := int64(-1), int64(-1)
		var top int64
		for _, j := range placed {
			if end[j] < start[i] || end[i] < start[j] {
				continue
			}
			if gap := offsets[j] - top; gap >= sizes[i] && (bestGap < 0 || gap < bestGap) {
				best, bestGap = top, gap
			}
			top = max(top, offsets[j]+sizes[j])
		}
		if best < 0 {
			best = top
		}
		offsets[i] = best
		total = max(total, best+sizes[i])
		k := sort.Search(len(placed), func(k int) bool { return offsets[placed[k]] > best })
		placed = append(placed, 0)
		copy(placed[k+1:], placed[k:])
		placed[k] = i
	}
	return offsets, total
}

// LowerBound returns the most bytes live at one instruction, and the first
// instruction where that many are live.
func LowerBound(sizes []int64, start, end []int, ninstr int) (int64, int) {
	delta := make([]int64, ninstr+2)
	for i := range sizes {
		delta[start[i]] += sizes[i]
		delta[end[i]+1] -= sizes[i]
	}
	var live, best int64
	at := 0
	for t := 0; t <= ninstr; t++ {
		live += delta[t]
		if live > best {
			best, at = live, t
		}
	}
	return best, at
}

// Top returns the n largest buffers (arena and persistent) as ledger
// entries, largest first.
func (p *Plan) Top(n int) []mem.Entry {
	out := make([]mem.Entry, 0, len(p.Buffers))
	for _, b := range p.Buffers {
		out = append(out, mem.Entry{Owner: b.Owner, Category: b.Category, Bytes: b.Bytes, Count: 1, Site: b.Site})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Bytes > out[j].Bytes })
	if len(out) > n {
		out = out[:n]
	}
	return out
}

// String prints the plan: the summary, the totals by category and one line
// per buffer (persistent ones first, then the arena by offset).
func (p *Plan) String() string {
	var b strings.Builder
	ratio := 1.0
	if p.LowerBound > 0 {
		ratio = float64(p.ArenaBytes) / float64(p.LowerBound)
	}
	fmt.Fprintf(&b, "instructions %d\n", p.Instrs)
	fmt.Fprintf(&b, "arena %d B, lower bound %d B (at instruction %d), arena/lower bound %.3f\n", p.ArenaBytes, p.LowerBound, p.PeakInstr, ratio)
	fmt.Fprintf(&b, "peak %d B (%s)\n", p.Peak, mem.FormatBytes(p.Peak))
	b.WriteString("totals:")
	for c := mem.Category(0); c < mem.NumCategories; c++ {
		fmt.Fprintf(&b, " %s=%d", c, p.Totals[c])
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "%-4s %-9s %-10s %10s %10s %-9s %s\n", "buf", "kind", "category", "bytes", "offset", "live", "owner")
	idx := make([]int, len(p.Buffers))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(i, j int) bool {
		x, y := &p.Buffers[idx[i]], &p.Buffers[idx[j]]
		if (x.Kind == KindArena) != (y.Kind == KindArena) {
			return x.Kind != KindArena
		}
		if x.Kind == KindArena {
			if x.Offset != y.Offset {
				return x.Offset < y.Offset
			}
			return x.Start < y.Start
		}
		return x.ID < y.ID
	})
	for _, i := range idx {
		x := &p.Buffers[i]
		off, live := "-", "-"
		if x.Kind == KindArena {
			off = fmt.Sprint(x.Offset)
			live = fmt.Sprintf("[%d,%d]", x.Start, x.End)
		}
		owner := x.Owner
		if len(x.Nodes) > 1 {
			owner += fmt.Sprintf(" (+%d shared)", len(x.Nodes)-1)
		}
		fmt.Fprintf(&b, "b%-3d %-9s %-10s %10d %10s %-9s %s %s%v\n", x.ID, x.Kind, x.Category, x.Bytes, off, live, owner, x.DType, x.Shape)
	}
	return b.String()
}

// Validate checks the plan's invariants: arena buffers that are live at the
// same instruction do not overlap, every arena buffer lies inside the arena,
// and the arena is no smaller than the lower bound.
func (p *Plan) Validate() error {
	var arena []*Buffer
	for i := range p.Buffers {
		b := &p.Buffers[i]
		if b.Kind != KindArena {
			continue
		}
		if b.Offset < 0 || b.Offset+b.Bytes > p.ArenaBytes || b.Offset%mem.Alignment != 0 {
			return fmt.Errorf("compile: buffer b%d (%s) at [%d, %d) is outside the %d-byte arena or misaligned", b.ID, b.Owner, b.Offset, b.Offset+b.Bytes, p.ArenaBytes)
		}
		if b.Start > b.End {
			return fmt.Errorf("compile: buffer b%d (%s) lives [%d, %d]", b.ID, b.Owner, b.Start, b.End)
		}
		arena = append(arena, b)
	}
	for i, x := range arena {
		for _, y := range arena[i+1:] {
			if x.End < y.Start || y.End < x.Start || x.Bytes == 0 || y.Bytes == 0 {
				continue
			}
			if x.Offset < y.Offset+y.Bytes && y.Offset < x.Offset+x.Bytes {
				return fmt.Errorf("compile: buffers b%d (%s, live [%d,%d]) and b%d (%s, live [%d,%d]) overlap in the arena", x.ID, x.Owner, x.Start, x.End, y.ID, y.Owner, y.Start, y.End)
			}
		}
	}
	if p.ArenaBytes < p.LowerBound {
		return fmt.Errorf("compile: arena %d B is below the lower bound %d B", p.ArenaBytes, p.LowerBound)
	}
	return nil
}
