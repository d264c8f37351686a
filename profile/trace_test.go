package profile

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/mem"
)

type jsonTrace struct {
	OtherData   map[string]string `json:"otherData"`
	TraceEvents []jsonEvent       `json:"traceEvents"`
}

type jsonEvent struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat"`
	Ph   string         `json:"ph"`
	Ts   *float64       `json:"ts"`
	Dur  *float64       `json:"dur"`
	Pid  int            `json:"pid"`
	Tid  int            `json:"tid"`
	Args map[string]any `json:"args"`
}

func writeParseTrace(t *testing.T, p *compile.Plan, opt TraceOptions) *jsonTrace {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteTraceOptions(&buf, p, "test", opt); err != nil {
		t.Fatal(err)
	}
	var tr jsonTrace
	if err := json.Unmarshal(buf.Bytes(), &tr); err != nil {
		t.Fatalf("trace is not valid JSON: %v", err)
	}
	return &tr
}

// liveAt returns, by brute force over the buffers, the bytes of each
// category live during instruction t (persistent ones always).
func liveAt(p *compile.Plan, t int) (by [mem.NumCategories]int64) {
	for _, b := range p.Buffers {
		if b.Kind != compile.KindArena || b.Start <= t && t <= b.End {
			by[b.Category] += b.Bytes
		}
	}
	return by
}

func TestTraceCounters(t *testing.T) {
	for _, c := range testPlans(t) {
		t.Run(c.name, func(t *testing.T) {
			p := c.plan
			tr := writeParseTrace(t, p, TraceOptions{})
			var persistent int64
			for _, b := range p.Buffers {
				if b.Kind != compile.KindArena {
					persistent += b.Bytes
				}
			}
			phases := map[string]int{}
			for _, e := range tr.TraceEvents {
				phases[e.Ph]++
				if e.Ph != "M" && e.Ts == nil {
					t.Errorf("event %s (%s) has no ts", e.Name, e.Ph)
				}
			}
			for _, ph := range []string{"M", "C", "X"} {
				if phases[ph] == 0 {
					t.Errorf("no %q events; got %v", ph, phases)
				}
			}
			// Replay the counters: at every instruction the last sample
			// before it must equal the bytes live there, by category.
			var live map[string]any
			var maxSum int64
			next := 0
			counters := []jsonEvent{}
			for _, e := range tr.TraceEvents {
				if e.Ph == "C" && e.Name == TraceLiveBytes {
					counters = append(counters, e)
				}
			}
			for instr := 0; instr <= p.Instrs; instr++ {
				for next < len(counters) && *counters[next].Ts <= float64(instr) {
					live = counters[next].Args
					next++
				}
				var want [mem.NumCategories]int64
				if instr < p.Instrs {
					want = liveAt(p, instr)
				} else {
					want = liveAt(p, -1)
				}
				var sum int64
				for cat := mem.Category(0); cat < mem.NumCategories; cat++ {
					v, _ := live[cat.String()].(float64)
					if v < 0 {
						t.Fatalf("instruction %d: counter %s = %v, want >= 0", instr, cat, v)
					}
					if int64(v) != want[cat] {
						t.Errorf("instruction %d: counter %s = %v, want %d", instr, cat, v, want[cat])
					}
					sum += int64(v)
				}
				maxSum = max(maxSum, sum)
			}
			if want := persistent + p.LowerBound; maxSum != want {
				t.Errorf("largest sum of the live counters %d B, want persistent %d B + lower bound %d B", maxSum, persistent, p.LowerBound)
			}
			for _, e := range tr.TraceEvents {
				if e.Ph == "C" && e.Name == TraceArenaBytes {
					l, f := e.Args["live"].(float64), e.Args["free"].(float64)
					if l < 0 || f < 0 || int64(l+f) != p.ArenaBytes {
						t.Errorf("arena counter at %v: live %v + free %v, want both >= 0 summing to %d", *e.Ts, l, f, p.ArenaBytes)
					}
				}
			}
		})
	}
}

func TestTraceBufferEvents(t *testing.T) {
	for _, c := range testPlans(t) {
		t.Run(c.name, func(t *testing.T) {
			p := c.plan
			tr := writeParseTrace(t, p, TraceOptions{})
			byBuf := map[string]jsonEvent{}
			type lane struct{ pid, tid int }
			lanes := map[lane][]jsonEvent{}
			for _, e := range tr.TraceEvents {
				if e.Ph != "X" {
					continue
				}
				byBuf[e.Args["buffer"].(string)] = e
				lanes[lane{e.Pid, e.Tid}] = append(lanes[lane{e.Pid, e.Tid}], e)
			}
			arena := 0
			for _, b := range p.Buffers {
				if b.Kind != compile.KindArena {
					continue
				}
				arena++
				e, ok := byBuf["b"+itoa(b.ID)]
				if !ok {
					t.Errorf("no event for arena buffer b%d (%s)", b.ID, b.Owner)
					continue
				}
				if e.Name != b.Owner || e.Cat != b.Category.String() || *e.Ts != float64(b.Start) || *e.Dur != float64(b.End-b.Start+1) {
					t.Errorf("b%d: event %s/%s at %v for %v, want %s/%s at %d for %d", b.ID, e.Name, e.Cat, *e.Ts, *e.Dur, b.Owner, b.Category, b.Start, b.End-b.Start+1)
				}
				if int64(e.Args["bytes"].(float64)) != b.Bytes || int64(e.Args["offset"].(float64)) != b.Offset {
					t.Errorf("b%d: args %v, want bytes %d offset %d", b.ID, e.Args, b.Bytes, b.Offset)
				}
			}
			if len(byBuf) != arena {
				t.Errorf("%d buffer events, want %d arena buffers", len(byBuf), arena)
			}
			for l, evs := range lanes {
				for i, x := range evs {
					for _, y := range evs[i+1:] {
						if *x.Ts < *y.Ts+*y.Dur && *y.Ts < *x.Ts+*x.Dur {
							t.Errorf("lane %v: %s [%v,+%v) and %s [%v,+%v) overlap", l, x.Name, *x.Ts, *x.Dur, y.Name, *y.Ts, *y.Dur)
						}
					}
				}
			}
		})
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestTraceProgramAndDurations(t *testing.T) {
	prog := mlpProgram(t)
	p := prog.Plan
	durs := make([]time.Duration, p.Instrs)
	var total time.Duration
	for i := range durs {
		durs[i] = time.Duration(i+1) * 1500 * time.Nanosecond
		total += durs[i]
	}
	tr := writeParseTrace(t, p, TraceOptions{Program: prog, Durations: durs})
	instrs, phases := 0, map[string]bool{}
	var end float64
	for _, e := range tr.TraceEvents {
		if e.Ph == "X" && e.Cat == "phase" {
			phases[e.Name] = true
		}
		if e.Ph == "X" && e.Pid == tracePidStep && e.Cat != "phase" {
			k := int(e.Args["instruction"].(float64))
			if want := float64(durs[k]) / 1e3; math.Abs(*e.Dur-want) > 1e-9 {
				t.Errorf("instruction %d lasts %v us, want %v", k, *e.Dur, want)
			}
			if e.Name != prog.Instrs[k].Op.String() || e.Args["owner"] != prog.Instrs[k].Owner {
				t.Errorf("instruction %d: event %s %v, want %s %s", k, e.Name, e.Args["owner"], prog.Instrs[k].Op, prog.Instrs[k].Owner)
			}
			instrs++
		}
		if e.Ph == "C" {
			end = max(end, *e.Ts)
		}
	}
	if instrs != p.Instrs {
		t.Errorf("%d instruction events, want %d", instrs, p.Instrs)
	}
	for _, ph := range []string{"forward", "backward", "update"} {
		if !phases[ph] {
			t.Errorf("no %s phase span; got %v", ph, phases)
		}
	}
	if want := float64(total) / 1e3; math.Abs(end-want) > 1e-6 {
		t.Errorf("last counter at %v us, want the step's end %v us", end, want)
	}
	if tr.OtherData["x_axis"] != "measured time" {
		t.Errorf("x axis %q, want measured time", tr.OtherData["x_axis"])
	}
	var buf bytes.Buffer
	if err := WriteTraceOptions(&buf, p, "bad", TraceOptions{Durations: durs[1:]}); err == nil || !strings.Contains(err.Error(), "durations") {
		t.Errorf("too few durations: error %v, want one about durations", err)
	}
}
