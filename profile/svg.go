package profile

import (
	"fmt"
	"html"
	"math"
	"strconv"
	"strings"

	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/mem"
)

// categoryColors are the fills of the categories in every chart (the
// Tableau 10 palette), in mem.Category order.
var categoryColors = [mem.NumCategories]string{"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1"}

// The charts' geometry in SVG user units: a plot area inside margins.
const (
	chartW, chartH            = 960, 300
	marginL, marginR, marginT = 90, 20, 16
	marginB                   = 40
	plotW, plotH              = chartW - marginL - marginR, chartH - marginT - marginB
)

// axis maps data values to SVG coordinates.
type axis struct {
	x0, x1 float64 // data range along x
	y0, y1 float64 // and y
}

func (a axis) x(v float64) float64 { return marginL + (v-a.x0)/(a.x1-a.x0)*plotW }
func (a axis) y(v float64) float64 { return marginT + plotH - (v-a.y0)/(a.y1-a.y0)*plotH }

func num(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// svgStart opens a chart with a title and a description for screen readers.
func svgStart(b *strings.Builder, id, title string) {
	fmt.Fprintf(b, `<svg id="%s" class="chart" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="%s">`+"\n",
		id, chartW, chartH, chartW, chartH, html.EscapeString(title))
	fmt.Fprintf(b, "<title>%s</title>\n", html.EscapeString(title))
}

// svgAxes draws the frame, ticks and labels of a chart. yLabel formats a
// y value.
func svgAxes(b *strings.Builder, a axis, xTicks, yTicks []float64, xName string, yLabel func(float64) string) {
	fmt.Fprintf(b, `<rect class="frame" x="%d" y="%d" width="%d" height="%d"/>`+"\n", marginL, marginT, plotW, plotH)
	for _, v := range yTicks {
		y := num(a.y(v))
		fmt.Fprintf(b, `<line class="grid" x1="%d" x2="%d" y1="%s" y2="%s"/><text class="tick" x="%d" y="%s" text-anchor="end" dy="4">%s</text>`+"\n",
			marginL, marginL+plotW, y, y, marginL-6, y, html.EscapeString(yLabel(v)))
	}
	for _, v := range xTicks {
		x := num(a.x(v))
		fmt.Fprintf(b, `<line class="grid" x1="%s" x2="%s" y1="%d" y2="%d"/><text class="tick" x="%s" y="%d" text-anchor="middle">%s</text>`+"\n",
			x, x, marginT, marginT+plotH, x, marginT+plotH+16, strconv.FormatFloat(v, 'f', -1, 64))
	}
	fmt.Fprintf(b, `<text class="axis" x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", marginL+plotW/2, chartH-6, html.EscapeString(xName))
}

// niceStep returns the smallest of 1, 2 or 5 times a power of ten that is
// at least raw.
func niceStep(raw float64) float64 {
	unit := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5} {
		if m*unit >= raw*(1-1e-9) {
			return m * unit
		}
	}
	return 10 * unit
}

// ticks returns the multiples of step in [lo, hi].
func ticks(lo, hi, step float64) []float64 {
	var out []float64
	for k := math.Ceil(lo/step - 1e-9); k*step <= hi+step*1e-9; k++ {
		v := k * step
		if v == 0 {
			v = 0 // not -0
		}
		out = append(out, v)
	}
	return out
}

// valueTicks returns about n round values in [lo, hi].
func valueTicks(lo, hi float64, n int) []float64 {
	if !(hi > lo) {
		return []float64{lo}
	}
	return ticks(lo, hi, niceStep((hi-lo)/float64(n)))
}

// intTicks returns about n round integers in [lo, hi] (instructions, epochs).
func intTicks(lo, hi float64, n int) []float64 {
	if !(hi > lo) {
		return []float64{math.Round(lo)}
	}
	return ticks(lo, hi, max(1, niceStep((hi-lo)/float64(n))))
}

// byteTicks returns multiples of a power of two in [0, hi], about n of them,
// so that their labels are round ("512 KiB", "1.5 MiB").
func byteTicks(hi float64, n int) []float64 {
	if !(hi > 0) {
		return []float64{0}
	}
	step := math.Exp2(math.Ceil(math.Log2(hi / float64(n))))
	return ticks(0, hi, max(1, step))
}

// byteLabel formats a byte count with a binary unit and no trailing zeros.
func byteLabel(v float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	u := 0
	for math.Abs(v) >= 1024 && u < len(units)-1 {
		v /= 1024
		u++
	}
	return strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64) + " " + units[u]
}

// memorySVG is the stacked area of bytes live by category over the step's
// instructions (instruction t spans [t, t+1) on the x axis), with the plan's
// peak (what is reserved) as a dashed line and the busiest instruction
// marked.
func memorySVG(p *compile.Plan, tl *timeline) string {
	var b strings.Builder
	svgStart(&b, "memory-plot", "Memory over the step by category")
	n := p.Instrs
	top := float64(max(p.Peak, tl.total(p.PeakInstr), 1))
	a := axis{x0: 0, x1: float64(max(n, 1)), y0: 0, y1: top * 1.05}
	svgAxes(&b, a, intTicks(0, a.x1, 10), byteTicks(top, 5), "instruction", byteLabel)
	steps := max(n, 1)
	lower := make([]float64, steps)
	upper := make([]float64, steps)
	for _, c := range tl.used() {
		for t := 0; t < steps; t++ {
			v := tl.persistent[c]
			if t < n {
				v += tl.arena[t][c]
			}
			upper[t] = lower[t] + float64(v)
		}
		var pts strings.Builder
		stepLine(&pts, a, upper, false)
		stepLine(&pts, a, lower, true)
		fmt.Fprintf(&b, `<polygon class="area" data-category="%s" fill="%s" points="%s"><title>%s</title></polygon>`+"\n",
			c, categoryColors[c], pts.String(), c)
		copy(lower, upper)
	}
	py := num(a.y(float64(p.Peak)))
	fmt.Fprintf(&b, `<line class="peak" x1="%d" x2="%d" y1="%s" y2="%s"/><text class="note" x="%d" y="%s" text-anchor="end" dy="-4">planned peak %s</text>`+"\n",
		marginL, marginL+plotW, py, py, marginL+plotW-4, py, html.EscapeString(mem.FormatBytes(p.Peak)))
	if n > 0 {
		x := num(a.x(float64(p.PeakInstr) + 0.5))
		fmt.Fprintf(&b, `<line class="marker" x1="%s" x2="%s" y1="%d" y2="%d"/><text class="note" x="%s" y="%d" dx="4">busiest instruction %d</text>`+"\n",
			x, x, marginT, marginT+plotH, x, marginT+plotH-6, p.PeakInstr)
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// stepLine appends the points of a step function v (v[t] over [t, t+1)) to
// pts, left to right or, reversed, right to left; only where v changes.
func stepLine(pts *strings.Builder, a axis, v []float64, reversed bool) {
	n := len(v)
	add := func(t int, y float64) {
		fmt.Fprintf(pts, "%s,%s ", num(a.x(float64(t))), num(a.y(y)))
	}
	if !reversed {
		add(0, v[0])
		for t := 1; t < n; t++ {
			if v[t] != v[t-1] {
				add(t, v[t-1])
				add(t, v[t])
			}
		}
		add(n, v[n-1])
		return
	}
	add(n, v[n-1])
	for t := n - 1; t > 0; t-- {
		if v[t] != v[t-1] {
			add(t, v[t])
			add(t, v[t-1])
		}
	}
	add(0, v[0])
}

// arenaSVG draws the arena as the planner laid it out: each arena buffer a
// rectangle from its first to its last instruction (x) over its bytes at
// their offset (y), as TensorFlow's memory viewer and PyTorch's snapshot
// viewer draw allocations.
func arenaSVG(p *compile.Plan) string {
	var b strings.Builder
	svgStart(&b, "arena-plot", "Arena layout: buffers by offset over the step")
	a := axis{x0: 0, x1: float64(max(p.Instrs, 1)), y0: 0, y1: float64(max(p.ArenaBytes, 1))}
	svgAxes(&b, a, intTicks(0, a.x1, 10), byteTicks(a.y1, 5), "instruction (y: offset in the arena)", byteLabel)
	for i := range p.Buffers {
		x := &p.Buffers[i]
		if x.Kind != compile.KindArena {
			continue
		}
		x0, x1 := a.x(float64(x.Start)), a.x(float64(x.End+1))
		y0, y1 := a.y(float64(x.Offset+x.Bytes)), a.y(float64(x.Offset))
		fmt.Fprintf(&b, `<rect class="buf" data-buffer="b%d" x="%s" y="%s" width="%s" height="%s" fill="%s"><title>b%d %s: %s %s, offset %d, live [%d,%d]%s</title></rect>`+"\n",
			x.ID, num(x0), num(y0), num(max(x1-x0, 0.5)), num(max(y1-y0, 0.5)), categoryColors[x.Category],
			x.ID, html.EscapeString(x.Owner), x.Category, html.EscapeString(mem.FormatBytes(x.Bytes)), x.Offset, x.Start, x.End, html.EscapeString(siteSuffix(x.Site)))
	}
	b.WriteString("</svg>\n")
	return b.String()
}

func siteSuffix(site string) string {
	if site == "" {
		return ""
	}
	return " (" + site + ")"
}

// lossSVG draws the loss (and validation loss, when there is one) per
// epoch of a run.
func lossSVG(h *Run) string {
	type series struct {
		name, class string
		at          func(e *Epoch) float64
	}
	all := []series{
		{"loss", "loss", func(e *Epoch) float64 { return e.Loss }},
		{"val_loss", "val-loss", func(e *Epoch) float64 { return e.ValLoss }},
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	first, last := math.Inf(1), math.Inf(-1)
	for i := range h.Epochs {
		e := &h.Epochs[i]
		for _, s := range all {
			if v := s.at(e); !math.IsNaN(v) && !math.IsInf(v, 0) {
				lo, hi = min(lo, v), max(hi, v)
				first, last = min(first, float64(e.Epoch)), max(last, float64(e.Epoch))
			}
		}
	}
	if math.IsInf(lo, 1) {
		return ""
	}
	if hi == lo {
		lo, hi = lo-0.5, hi+0.5
	}
	pad := (hi - lo) * 0.05
	a := axis{x0: first - 0.5, x1: last + 0.5, y0: min(0, lo-pad), y1: hi + pad}
	if lo-pad > 0 && lo > (hi-lo) { // a loss far from 0: zoom in
		a.y0 = lo - pad
	}
	var b strings.Builder
	svgStart(&b, "loss-plot", "Loss per epoch")
	svgAxes(&b, a, intTicks(first, last, 10), valueTicks(a.y0, a.y1, 5), "epoch", func(v float64) string { return strconv.FormatFloat(v, 'g', 4, 64) })
	for _, s := range all {
		var pts strings.Builder
		var dots strings.Builder
		count := 0
		for i := range h.Epochs {
			e := &h.Epochs[i]
			v := s.at(e)
			if math.IsNaN(v) || math.IsInf(v, 0) {
				continue
			}
			x, y := num(a.x(float64(e.Epoch))), num(a.y(v))
			fmt.Fprintf(&pts, "%s,%s ", x, y)
			fmt.Fprintf(&dots, `<circle class="%s" cx="%s" cy="%s" r="3"><title>epoch %d %s %.6g</title></circle>`+"\n", s.class, x, y, e.Epoch, s.name, v)
			count++
		}
		if count == 0 {
			continue
		}
		fmt.Fprintf(&b, `<polyline class="%s" fill="none" points="%s"/>`+"\n", s.class, pts.String())
		b.WriteString(dots.String())
	}
	b.WriteString("</svg>\n")
	return b.String()
}
