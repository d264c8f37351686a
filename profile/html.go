package profile

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"sort"
	"strconv"

	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/mem"
)

// WriteHTML writes a report of the plan (and, when h is not nil, of the run
// that trained with it) as one self-contained HTML file: inline CSS, inline
// SVG, a few lines of inline JavaScript to sort the tables, and nothing
// fetched from anywhere. It holds:
//   - a summary: the planned peak, persistent bytes, arena, lower bound and
//     fragmentation, and the totals by category;
//   - #memory-plot: bytes live by category over the step (stacked areas
//     over the instruction index), the planned peak and the busiest
//     instruction;
//   - #arena-plot: the arena's buffers by offset over the step;
//   - #loss-plot (with h): loss and validation loss per epoch, and the run's
//     figures (steps, throughput, measured peak, ledger growth);
//   - #layers: bytes by layer (see Layer), at the peak and in all;
//   - #plan: every buffer (kind, category, bytes, offset, lifetime, owner,
//     value, site), largest first.
func WriteHTML(w io.Writer, p *compile.Plan, h *Run, title string) error {
	tl, err := newTimeline(p)
	if err != nil {
		return err
	}
	r := report{Title: title, Plan: p,
		Peak:        mem.FormatBytes(p.Peak),
		Persistent:  mem.FormatBytes(p.Peak - p.ArenaBytes),
		Arena:       mem.FormatBytes(p.ArenaBytes),
		LowerBound:  mem.FormatBytes(p.LowerBound),
		Unused:      mem.FormatBytes(p.ArenaBytes - p.LowerBound),
		MemorySVG:   template.HTML(memorySVG(p, tl)),
		ArenaSVG:    template.HTML(arenaSVG(p)),
		Instrs:      p.Instrs,
		PeakInstr:   p.PeakInstr,
		HistoryRuns: h != nil,
	}
	for c := mem.Category(0); c < mem.NumCategories; c++ {
		if p.Totals[c] == 0 && tl.persistent[c] == 0 && p.ArenaShare[c] == 0 {
			continue
		}
		r.Categories = append(r.Categories, categoryRow{Name: c.String(), Color: categoryColors[c],
			Total: p.Totals[c], Persistent: tl.persistent[c], Arena: p.ArenaShare[c]})
	}
	r.Layers = layerRows(p)
	r.Buffers = bufferRows(p)
	if h != nil {
		r.LossSVG = template.HTML(lossSVG(h))
		r.Run = runRows(h)
	}
	if err := reportTemplate.Execute(w, &r); err != nil {
		return fmt.Errorf("profile: writing HTML report %q: %w", title, err)
	}
	return nil
}

type report struct {
	Title                                       string
	Plan                                        *compile.Plan
	Peak, Persistent, Arena, LowerBound, Unused string
	Instrs, PeakInstr                           int
	Categories                                  []categoryRow
	MemorySVG, ArenaSVG, LossSVG                template.HTML
	HistoryRuns                                 bool
	Run                                         [][2]string
	Layers                                      []layerRow
	Buffers                                     []bufferRow
}

type categoryRow struct {
	Name, Color              string
	Total, Persistent, Arena int64
}

type layerRow struct {
	Layer               string
	Peak, Bytes, Params int64
	Buffers             int
}

type bufferRow struct {
	ID                 int
	Kind, Category     string
	Color              string
	Bytes              int64
	Offset             string // "-" outside the arena
	OffsetV            int64  // sort key: -1 outside the arena
	Live               string
	Start              int // sort key: -1 outside the arena
	Owner, Value, Site string
}

// layerRows sums the buffers by layer, largest share of the peak first.
func layerRows(p *compile.Plan) []layerRow {
	idx := map[string]int{}
	var rows []layerRow
	for i := range p.Buffers {
		b := &p.Buffers[i]
		l := Layer(b.Owner)
		k, ok := idx[l]
		if !ok {
			k = len(rows)
			idx[l] = k
			rows = append(rows, layerRow{Layer: l})
		}
		rows[k].Peak += peakBytes(p, b)
		rows[k].Bytes += b.Bytes
		rows[k].Buffers++
		if b.Category == mem.Param {
			rows[k].Params += b.Bytes
		}
	}
	if gap := p.ArenaBytes - p.LowerBound; gap > 0 {
		rows = append(rows, layerRow{Layer: ArenaFragmentation, Peak: gap, Bytes: gap})
	}
	sort.SliceStable(rows, func(i, j int) bool {
		if rows[i].Peak != rows[j].Peak {
			return rows[i].Peak > rows[j].Peak
		}
		return rows[i].Bytes > rows[j].Bytes
	})
	return rows
}

func bufferRows(p *compile.Plan) []bufferRow {
	rows := make([]bufferRow, 0, len(p.Buffers))
	for i := range p.Buffers {
		b := &p.Buffers[i]
		r := bufferRow{ID: b.ID, Kind: b.Kind.String(), Category: b.Category.String(), Color: categoryColors[b.Category],
			Bytes: b.Bytes, Offset: "-", OffsetV: -1, Live: "step", Start: -1, Owner: b.Owner, Value: shapeString(b), Site: b.Site}
		if b.Kind == compile.KindArena {
			r.Offset, r.OffsetV = strconv.FormatInt(b.Offset, 10), b.Offset
			r.Live, r.Start = fmt.Sprintf("[%d,%d]", b.Start, b.End), b.Start
		}
		if len(b.Nodes) > 1 {
			r.Owner += fmt.Sprintf(" (+%d shared)", len(b.Nodes)-1)
		}
		rows = append(rows, r)
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].Bytes > rows[j].Bytes })
	return rows
}

func runRows(h *Run) [][2]string {
	f := func(v float64) string {
		if math.IsNaN(v) {
			return "-"
		}
		return strconv.FormatFloat(v, 'g', 6, 64)
	}
	rows := [][2]string{
		{"epochs", strconv.Itoa(len(h.Epochs))},
		{"steps", strconv.FormatInt(h.Steps, 10)},
		{"first loss", f(h.FirstLoss)},
		{"last loss", f(h.LastLoss)},
		{"samples/s", f(h.SamplesPerSec)},
		{"train seconds", f(h.TrainSeconds)},
		{"measured peak", mem.FormatBytes(h.MeasuredPeak)},
		{"ledger growth", mem.FormatBytes(h.LedgerGrowth)},
	}
	for _, g := range h.Growth {
		rows = append(rows, [2]string{"grew: " + g.Owner + " (" + g.Category.String() + ")", mem.FormatBytes(g.Bytes)})
	}
	if len(h.Epochs) > 0 {
		last := &h.Epochs[len(h.Epochs)-1]
		rows = append(rows, [2]string{"last accuracy", f(last.Accuracy)}, [2]string{"last val_loss", f(last.ValLoss)}, [2]string{"last val_accuracy", f(last.ValAccuracy)})
	}
	return rows
}

var reportTemplate = template.Must(template.New("report").Funcs(template.FuncMap{
	"bytes": mem.FormatBytes,
}).Parse(reportHTML))

const reportHTML = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #222; background: #fff; }
h1 { font-size: 22px; margin: 0 0 8px; }
h2 { font-size: 17px; margin: 28px 0 8px; }
table { border-collapse: collapse; font-size: 13px; }
th, td { padding: 3px 8px; border-bottom: 1px solid #ddd; text-align: left; white-space: nowrap; }
th { background: #f3f3f3; cursor: pointer; user-select: none; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; }
.swatch { display: inline-block; width: 10px; height: 10px; margin-right: 6px; border-radius: 2px; }
.chart { display: block; max-width: 100%; height: auto; }
.chart .frame { fill: none; stroke: #999; }
.chart .grid { stroke: #e6e6e6; }
.chart .tick, .chart .axis, .chart .note { font-size: 11px; fill: #555; }
.chart .area { stroke: #fff; stroke-width: 0.5; }
.chart .peak { stroke: #c00; stroke-dasharray: 6 4; }
.chart .marker { stroke: #333; stroke-dasharray: 2 3; }
.chart .buf { stroke: #fff; stroke-width: 0.3; }
.chart polyline.loss { stroke: #4e79a7; stroke-width: 2; }
.chart polyline.val-loss { stroke: #f28e2b; stroke-width: 2; }
.chart circle.loss { fill: #4e79a7; }
.chart circle.val-loss { fill: #f28e2b; }
.legend span { margin-right: 16px; }
</style>
</head>
<body>
<h1>{{.Title}}</h1>
<p class="summary">Planned peak <b>{{.Peak}}</b> ({{.Plan.Peak}} B) = persistent {{.Persistent}} + arena {{.Arena}}.
The arena's lower bound is {{.LowerBound}} (the most bytes live at once, at instruction {{.PeakInstr}} of {{.Instrs}});
{{.Unused}} of the arena is unused there.</p>

<h2>Memory by category</h2>
<table id="categories">
<thead><tr><th>category</th><th class="n">at peak</th><th class="n">persistent</th><th class="n">arena share</th></tr></thead>
<tbody>
{{range .Categories}}<tr><td><span class="swatch" style="background: {{.Color}}"></span>{{.Name}}</td><td class="n" data-v="{{.Total}}">{{bytes .Total}}</td><td class="n" data-v="{{.Persistent}}">{{bytes .Persistent}}</td><td class="n" data-v="{{.Arena}}">{{bytes .Arena}}</td></tr>
{{end}}</tbody>
</table>

<h2>Memory over the step</h2>
{{.MemorySVG}}
<p class="legend">{{range .Categories}}<span><span class="swatch" style="background: {{.Color}}"></span>{{.Name}}</span>{{end}}</p>

<h2>Arena layout</h2>
{{.ArenaSVG}}
{{if .HistoryRuns}}
<h2>Training</h2>
{{.LossSVG}}
<p class="legend"><span><span class="swatch" style="background: #4e79a7"></span>loss</span><span><span class="swatch" style="background: #f28e2b"></span>val_loss</span></p>
<table id="run"><tbody>
{{range .Run}}<tr><th>{{index . 0}}</th><td class="n">{{index . 1}}</td></tr>
{{end}}</tbody></table>
{{end}}
<h2>Layers</h2>
<table id="layers" class="sortable">
<thead><tr><th>layer</th><th class="n">at peak</th><th class="n">all buffers</th><th class="n">params</th><th class="n">buffers</th></tr></thead>
<tbody>
{{range .Layers}}<tr><td>{{.Layer}}</td><td class="n" data-v="{{.Peak}}">{{bytes .Peak}}</td><td class="n" data-v="{{.Bytes}}">{{bytes .Bytes}}</td><td class="n" data-v="{{.Params}}">{{bytes .Params}}</td><td class="n" data-v="{{.Buffers}}">{{.Buffers}}</td></tr>
{{end}}</tbody>
</table>

<h2>Plan</h2>
<table id="plan" class="sortable">
<thead><tr><th class="n">buf</th><th>kind</th><th>category</th><th class="n">bytes</th><th class="n">offset</th><th>live</th><th>owner</th><th>value</th><th>site</th></tr></thead>
<tbody>
{{range .Buffers}}<tr><td class="n" data-v="{{.ID}}">b{{.ID}}</td><td>{{.Kind}}</td><td><span class="swatch" style="background: {{.Color}}"></span>{{.Category}}</td><td class="n" data-v="{{.Bytes}}">{{.Bytes}}</td><td class="n" data-v="{{.OffsetV}}">{{.Offset}}</td><td data-v="{{.Start}}">{{.Live}}</td><td>{{.Owner}}</td><td>{{.Value}}</td><td>{{.Site}}</td></tr>
{{end}}</tbody>
</table>
<script>
(function () {
  var tables = document.querySelectorAll("table.sortable");
  function key(td) {
    var v = td.getAttribute("data-v");
    return v === null ? td.textContent : parseFloat(v);
  }
  Array.prototype.forEach.call(tables, function (t) {
    var dir = {};
    Array.prototype.forEach.call(t.tHead.rows[0].cells, function (th, i) {
      th.addEventListener("click", function () {
        var d = dir[i] = -(dir[i] || 1);
        var body = t.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var x = key(a.cells[i]), y = key(b.cells[i]);
          return x < y ? d : x > y ? -d : 0;
        });
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  });
  document.body.setAttribute("data-ready", "1");
})();
</script>
</body>
</html>
`
