package profile

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/google/pprof/profile"

	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/mem"
)

// The pprof sample types, in the order of Sample.Value.
const (
	// PeakBytes is each buffer's share of Plan.Peak (the default sample
	// type): persistent buffers at their size; arena buffers at their size
	// when they are live at Plan.PeakInstr, else 0; and one sample owned by
	// ArenaFragmentation for the arena bytes that no buffer occupies at
	// PeakInstr (ArenaBytes - LowerBound). The samples sum to Plan.Peak and,
	// by category, to Plan.Totals.
	PeakBytes = "peak_bytes"
	// BufferBytes is each buffer at its full size, whenever it lives, as Go
	// heap profiles' alloc_space: the arena buffers sum to more than the
	// arena, because they share it over time. Every buffer of every layer
	// shows here, also those not live at the peak.
	BufferBytes = "buffer_bytes"
	// Buffers counts buffers (1 per sample; 0 for the fragmentation sample).
	Buffers = "buffers"
)

// ArenaFragmentation owns the arena bytes left unoccupied at the plan's
// peak instruction.
const ArenaFragmentation = "(arena fragmentation)"

// WritePprof writes a gzipped pprof profile of the plan's buffers to w: one
// sample per buffer, with values PeakBytes, BufferBytes and Buffers
// (PeakBytes is the default), and labels owner, layer (see Layer),
// category, kind and site; offsets and lifetimes are in the trace and the
// HTML report, which draw them. A sample's stack is the owner's function,
// named by the owner with the Go call site that built it as file and line,
// called from the layer's function; so
//
//	go tool pprof -top profile.pb.gz          lists owners by peak bytes
//	go tool pprof -top -cum profile.pb.gz     lists layers by peak bytes
//	go tool pprof -tags profile.pb.gz         splits the bytes by category, layer, owner
//	go tool pprof -sample_index=buffer_bytes  every buffer at its size
//
// name names the profile (the program or model). WritePprof fails if the
// plan's buffers do not add up to its Peak and Totals.
func WritePprof(w io.Writer, p *compile.Plan, name string) error {
	prof, err := pprofProfile(p, name)
	if err != nil {
		return err
	}
	if err := prof.Write(w); err != nil {
		return fmt.Errorf("profile: writing pprof profile %s: %w", name, err)
	}
	return nil
}

func pprofProfile(p *compile.Plan, name string) (*profile.Profile, error) {
	if err := checkPlan(p); err != nil {
		return nil, err
	}
	mapping := &profile.Mapping{ID: 1, File: name, HasFunctions: true, HasFilenames: true, HasLineNumbers: true}
	prof := &profile.Profile{
		SampleType: []*profile.ValueType{
			{Type: PeakBytes, Unit: "bytes"},
			{Type: BufferBytes, Unit: "bytes"},
			{Type: Buffers, Unit: "count"},
		},
		DefaultSampleType: PeakBytes,
		PeriodType:        &profile.ValueType{Type: "space", Unit: "bytes"},
		Period:            1,
		Mapping:           []*profile.Mapping{mapping},
		Comments: []string{
			fmt.Sprintf("headroom plan %s: peak %d B (%s) = persistent %d B + arena %d B", name, p.Peak, mem.FormatBytes(p.Peak), p.Peak-p.ArenaBytes, p.ArenaBytes),
			fmt.Sprintf("arena lower bound %d B at instruction %d of %d; %s: arena buffers live there at their size, the rest of the arena as %q", p.LowerBound, p.PeakInstr, p.Instrs, PeakBytes, ArenaFragmentation),
		},
	}
	st := &stacks{prof: prof, mapping: mapping, funcs: map[funcKey]*profile.Function{}, locs: map[string]*profile.Location{}}
	var sum int64
	var byCat [mem.NumCategories]int64
	for i := range p.Buffers {
		b := &p.Buffers[i]
		peak := peakBytes(p, b)
		s := &profile.Sample{
			Label: map[string][]string{
				"owner":    {b.Owner},
				"layer":    {Layer(b.Owner)},
				"category": {b.Category.String()},
				"kind":     {b.Kind.String()},
			},
		}
		if b.Site != "" {
			s.Label["site"] = []string{b.Site}
		}
		s.Value = []int64{peak, b.Bytes, 1}
		s.Location = st.stack(b.Owner, b.Site)
		prof.Sample = append(prof.Sample, s)
		sum += peak
		byCat[b.Category] += peak
	}
	if gap := p.ArenaBytes - p.LowerBound; gap > 0 {
		prof.Sample = append(prof.Sample, &profile.Sample{
			Value:    []int64{gap, 0, 0},
			Location: st.stack(ArenaFragmentation, ""),
			Label: map[string][]string{
				"owner":    {ArenaFragmentation},
				"layer":    {ArenaFragmentation},
				"category": {mem.Workspace.String()},
				"kind":     {compile.KindArena.String()},
			},
		})
		sum += gap
		byCat[mem.Workspace] += gap
	}
	if sum != p.Peak || byCat != p.Totals {
		return nil, fmt.Errorf("profile: plan %s: its buffers at instruction %d add up to %d B %v, but the plan says peak %d B %v", name, p.PeakInstr, sum, byCat, p.Peak, p.Totals)
	}
	if err := prof.CheckValid(); err != nil {
		return nil, fmt.Errorf("profile: pprof profile of plan %s: %w", name, err)
	}
	return prof, nil
}

// peakBytes returns b's share of p.Peak: its size if it is persistent or
// live at p.PeakInstr, else 0.
func peakBytes(p *compile.Plan, b *compile.Buffer) int64 {
	if b.Kind == compile.KindArena && (b.Start > p.PeakInstr || p.PeakInstr > b.End) {
		return 0
	}
	return b.Bytes
}

type funcKey struct {
	name, file string
	line       int64
}

// stacks hands out one location per (owner, site) and per layer.
type stacks struct {
	prof    *profile.Profile
	mapping *profile.Mapping
	funcs   map[funcKey]*profile.Function
	locs    map[string]*profile.Location
}

// stack returns [owner's location, layer's location], the leaf first as
// pprof orders them; just the owner's when it is its own layer.
func (st *stacks) stack(owner, site string) []*profile.Location {
	file, line := splitSite(site)
	leaf := st.location("o\x00"+owner+"\x00"+site, owner, file, line)
	layer := Layer(owner)
	if layer == owner || owner == ArenaFragmentation {
		return []*profile.Location{leaf}
	}
	return []*profile.Location{leaf, st.location("l\x00"+layer, layer, "", 0)}
}

func (st *stacks) location(key, fn, file string, line int64) *profile.Location {
	if l, ok := st.locs[key]; ok {
		return l
	}
	fk := funcKey{fn, file, line}
	f := st.funcs[fk]
	if f == nil {
		f = &profile.Function{ID: uint64(len(st.prof.Function) + 1), Name: fn, SystemName: fn, Filename: file, StartLine: line}
		st.funcs[fk] = f
		st.prof.Function = append(st.prof.Function, f)
	}
	l := &profile.Location{ID: uint64(len(st.prof.Location) + 1), Mapping: st.mapping, Line: []profile.Line{{Function: f, Line: line}}}
	st.locs[key] = l
	st.prof.Location = append(st.prof.Location, l)
	return l
}

// splitSite splits "nn/layers.go:40" into its file and line; a site without
// a line number is all file.
func splitSite(site string) (string, int64) {
	i := strings.LastIndexByte(site, ':')
	if i < 0 {
		return site, 0
	}
	n, err := strconv.ParseInt(site[i+1:], 10, 64)
	if err != nil {
		return site, 0
	}
	return site[:i], n
}
