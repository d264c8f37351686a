package profile

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"time"

	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/mem"
)

// TraceOptions add to a trace what a Plan alone does not hold.
type TraceOptions struct {
	// Program, when set, adds a "phases" track (forward, backward, update
	// spans) and an "instructions" track (one event per instruction: op,
	// owner, site). Its Plan should be the plan being written.
	Program *compile.Program
	// Durations, when set, holds the measured time of each instruction
	// (len == Plan.Instrs); the x axis is then real time. Otherwise
	// instruction t runs from t µs to t+1 µs.
	Durations []time.Duration
}

// Trace process ids: the memory counters and step tracks, and the arena
// buffers.
const (
	tracePidStep    = 1
	tracePidBuffers = 2
)

// Counter names in the trace.
const (
	// TraceLiveBytes is the counter of live bytes by category (one series
	// per category; persistent buffers count for the whole step).
	TraceLiveBytes = "live bytes"
	// TraceArenaBytes is the counter of the arena: "live" (bytes of arena
	// buffers live) and "free" (ArenaBytes minus live), which stack to the
	// arena's size.
	TraceArenaBytes = "arena bytes"
)

// traceEvent is one event of the Trace Event Format (the JSON that
// chrome://tracing and ui.perfetto.dev open): ph "M" metadata, "C" counter,
// "X" complete event with a duration. Times are in microseconds.
type traceEvent struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat,omitempty"`
	Ph   string         `json:"ph"`
	Ts   float64        `json:"ts"`
	Dur  *float64       `json:"dur,omitempty"`
	Pid  int            `json:"pid"`
	Tid  int            `json:"tid"`
	Args map[string]any `json:"args,omitempty"`
}

// WriteTrace writes the plan's memory over one step as Trace Event Format
// JSON (see WriteTraceOptions) with instruction t at t µs.
func WriteTrace(w io.Writer, p *compile.Plan, name string) error {
	return WriteTraceOptions(w, p, name, TraceOptions{})
}

// WriteTraceOptions writes the plan's memory over one step as Trace Event
// Format JSON for ui.perfetto.dev and chrome://tracing:
//   - process "<name> step": the counter TraceLiveBytes (bytes live by
//     category: persistent ones for the whole step, arena buffers from
//     their first to their last instruction), the counter TraceArenaBytes,
//     and with opt.Program the tracks "phases" and "instructions";
//   - process "<name> arena buffers": one complete event per arena buffer
//     lifetime (name: owner; cat: category; args: buffer, bytes, offset,
//     value, site), spread over as few "buffers" lanes as keep the events of
//     a lane from overlapping.
//
// Counters are sampled at each instruction where they change and at the
// step's end (persistent bytes only), so the largest TraceLiveBytes sum is
// the persistent bytes plus Plan.LowerBound.
func WriteTraceOptions(w io.Writer, p *compile.Plan, name string, opt TraceOptions) error {
	tl, err := newTimeline(p)
	if err != nil {
		return err
	}
	if opt.Durations != nil && len(opt.Durations) != p.Instrs {
		return fmt.Errorf("profile: trace of %s: %d durations for %d instructions", name, len(opt.Durations), p.Instrs)
	}
	if opt.Program != nil && len(opt.Program.Instrs) != p.Instrs {
		return fmt.Errorf("profile: trace of %s: the program has %d instructions, the plan %d", name, len(opt.Program.Instrs), p.Instrs)
	}
	// ts[t] is when instruction t starts; ts[Instrs] is the step's end.
	ts := make([]float64, p.Instrs+1)
	for t := 0; t < p.Instrs; t++ {
		d := 1.0
		if opt.Durations != nil {
			d = float64(opt.Durations[t]) / float64(time.Microsecond)
		}
		ts[t+1] = ts[t] + d
	}
	xAxis := "instruction index (1 us per instruction)"
	if opt.Durations != nil {
		xAxis = "measured time"
	}

	bw := bufio.NewWriter(w)
	tw := &traceWriter{w: bw}
	fmt.Fprintf(bw, "{\"otherData\":{\"plan\":%s,\"x_axis\":%s,\"peak_bytes\":\"%d\",\"arena_bytes\":\"%d\",\"lower_bound_bytes\":\"%d\",\"instructions\":\"%d\"},\n\"traceEvents\":[\n",
		jsonString(name), jsonString(xAxis), p.Peak, p.ArenaBytes, p.LowerBound, p.Instrs)
	meta := func(pid, tid int, what, value string, sort int) {
		tw.event(traceEvent{Name: what, Ph: "M", Pid: pid, Tid: tid, Args: map[string]any{"name": value}})
		idx := "process_sort_index"
		if what == "thread_name" {
			idx = "thread_sort_index"
		}
		tw.event(traceEvent{Name: idx, Ph: "M", Pid: pid, Tid: tid, Args: map[string]any{"sort_index": sort}})
	}
	meta(tracePidStep, 0, "process_name", name+" step", 0)
	meta(tracePidBuffers, 0, "process_name", name+" arena buffers", 1)

	// Counters.
	cats := tl.used()
	var prevLive map[string]any
	var prevArena int64 = -1
	for t := 0; t <= p.Instrs; t++ {
		var at [mem.NumCategories]int64
		if t < p.Instrs {
			at = tl.arena[t]
		}
		live := make(map[string]any, len(cats))
		var arena int64
		for _, c := range cats {
			live[c.String()] = tl.persistent[c] + at[c]
			arena += at[c]
		}
		if prevLive == nil || !sameCounters(live, prevLive) {
			tw.event(traceEvent{Name: TraceLiveBytes, Ph: "C", Ts: ts[t], Pid: tracePidStep, Args: live})
			prevLive = live
		}
		if arena != prevArena {
			tw.event(traceEvent{Name: TraceArenaBytes, Ph: "C", Ts: ts[t], Pid: tracePidStep, Args: map[string]any{"live": arena, "free": p.ArenaBytes - arena}})
			prevArena = arena
		}
	}

	if opt.Program != nil {
		writeSteps(tw, opt.Program, ts)
	}

	// Buffer lifetimes, in lanes.
	arena := make([]*compile.Buffer, 0, len(p.Buffers))
	for i := range p.Buffers {
		if p.Buffers[i].Kind == compile.KindArena {
			arena = append(arena, &p.Buffers[i])
		}
	}
	sort.SliceStable(arena, func(i, j int) bool {
		if arena[i].Start != arena[j].Start {
			return arena[i].Start < arena[j].Start
		}
		return arena[i].End > arena[j].End
	})
	var laneEnd []int // last instruction of each lane's latest event
	for _, b := range arena {
		lane := -1
		for l, end := range laneEnd {
			if end < b.Start {
				lane = l
				break
			}
		}
		if lane < 0 {
			lane = len(laneEnd)
			laneEnd = append(laneEnd, 0)
			label := "buffers"
			if lane > 0 {
				label = "buffers " + strconv.Itoa(lane+1)
			}
			meta(tracePidBuffers, lane+1, "thread_name", label, lane)
		}
		laneEnd[lane] = b.End
		dur := ts[b.End+1] - ts[b.Start]
		args := map[string]any{"buffer": "b" + strconv.Itoa(b.ID), "bytes": b.Bytes, "offset": b.Offset,
			"value": shapeString(b), "live": fmt.Sprintf("[%d,%d]", b.Start, b.End)}
		if b.Site != "" {
			args["site"] = b.Site
		}
		tw.event(traceEvent{Name: b.Owner, Cat: b.Category.String(), Ph: "X", Ts: ts[b.Start], Dur: &dur, Pid: tracePidBuffers, Tid: lane + 1, Args: args})
	}
	if tw.err != nil {
		return fmt.Errorf("profile: writing trace of %s: %w", name, tw.err)
	}
	bw.WriteString("\n]}\n")
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("profile: writing trace of %s: %w", name, err)
	}
	return nil
}

// writeSteps adds the "phases" and "instructions" tracks of a program.
func writeSteps(tw *traceWriter, prog *compile.Program, ts []float64) {
	const tidPhases, tidInstrs = 1, 2
	for _, m := range []struct {
		tid  int
		name string
	}{{tidPhases, "phases"}, {tidInstrs, "instructions"}} {
		tw.event(traceEvent{Name: "thread_name", Ph: "M", Pid: tracePidStep, Tid: m.tid, Args: map[string]any{"name": m.name}})
		tw.event(traceEvent{Name: "thread_sort_index", Ph: "M", Pid: tracePidStep, Tid: m.tid, Args: map[string]any{"sort_index": m.tid}})
	}
	phase := func(t int) string {
		id := prog.Instrs[t].Node
		if prog.Graph == nil || id < 0 || id >= prog.Graph.Len() {
			return "step"
		}
		return prog.Graph.Node(id).Phase().String()
	}
	begin := 0
	for t := range prog.Instrs {
		in := &prog.Instrs[t]
		dur := ts[t+1] - ts[t]
		args := map[string]any{"instruction": t, "owner": in.Owner, "out": "b" + strconv.Itoa(in.Out)}
		if in.Site != "" {
			args["site"] = in.Site
		}
		tw.event(traceEvent{Name: in.Op.String(), Cat: phase(t), Ph: "X", Ts: ts[t], Dur: &dur, Pid: tracePidStep, Tid: tidInstrs, Args: args})
		if t+1 == len(prog.Instrs) || phase(t+1) != phase(begin) {
			d := ts[t+1] - ts[begin]
			tw.event(traceEvent{Name: phase(begin), Cat: "phase", Ph: "X", Ts: ts[begin], Dur: &d, Pid: tracePidStep, Tid: tidPhases,
				Args: map[string]any{"instructions": fmt.Sprintf("[%d,%d]", begin, t)}})
			begin = t + 1
		}
	}
}

type traceWriter struct {
	w   *bufio.Writer
	n   int // events written
	err error
}

func (tw *traceWriter) event(e traceEvent) {
	if tw.err != nil {
		return
	}
	b, err := json.Marshal(e)
	if err != nil {
		tw.err = err
		return
	}
	if tw.n > 0 {
		tw.w.WriteString(",\n")
	}
	tw.n++
	_, tw.err = tw.w.Write(b)
}

func sameCounters(a, b map[string]any) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
