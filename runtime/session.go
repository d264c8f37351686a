package runtime

import (
	"errors"
	"fmt"
	"sort"

	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/tensor"
)

// Session is a set of programs that run one at a time in one shared arena
// on an engine: a training step, its evaluation step and the steps of a
// smaller last batch; an inference step; a decoder's one-token step. Open
// reserves everything at once (the arena, as large as the largest
// program's; the backend's scratch, as large as the largest program's;
// every program's own buffers and the variables they create), so a
// session's memory is known, and taken, before the first run. Add loads
// one more program into the same arena later (a batch size no one planned
// for). Every user of compiled programs goes through a Session: the
// trainer, the predictor, text generation, the ONNX exporter's reference
// runs and the bench tools.
type Session struct {
	engine *Engine
	arena  *Arena
	progs  map[string]*Executable
}

// Reservation is what a set of programs reserves together, by category:
// every variable once, the backend's scratch once (the largest), the
// largest arena (split by category as its plan splits it) and each
// program's own buffers (inputs, outputs, constants). Arena is the arena's
// split alone.
type Reservation struct {
	Totals [mem.NumCategories]int64
	Arena  [mem.NumCategories]int64
}

// Bytes returns the reservation's total.
func (r Reservation) Bytes() int64 {
	var t int64
	for _, b := range r.Totals {
		t += b
	}
	return t
}

// Reserve returns what Open reserves for progs, without reserving it.
func Reserve(progs []*compile.Program) Reservation {
	type v struct {
		cat   mem.Category
		bytes int64
	}
	vars := map[string]v{}
	var r Reservation
	var arena int64
	for _, p := range sortedPrograms(progs) {
		for _, b := range p.Plan.Buffers {
			switch b.Kind {
			case compile.KindVariable:
				vars[b.Name] = v{b.Category, b.Bytes}
			case compile.KindScratch:
				if b.Bytes > vars[b.Name].bytes {
					vars[b.Name] = v{b.Category, b.Bytes}
				}
			case compile.KindArena:
			default:
				r.Totals[b.Category] += b.Bytes
			}
		}
		if p.Plan.ArenaBytes > arena {
			arena = p.Plan.ArenaBytes
			r.Arena = p.Plan.ArenaShare
		}
	}
	for _, x := range vars {
		r.Totals[x.cat] += x.bytes
	}
	for c, b := range r.Arena {
		r.Totals[c] += b
	}
	return r
}

// sortedPrograms returns progs in name order (a deterministic reservation
// whatever order the caller built them in).
func sortedPrograms(progs []*compile.Program) []*compile.Program {
	out := append([]*compile.Program(nil), progs...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Open reserves progs (named by Program.Name, each name once) as one
// session: the shared arena, the largest scratch, and each program loaded
// into the arena. On failure it releases everything it took; an
// *mem.OOMError says what the device or the budget refused.
func (e *Engine) Open(progs ...*compile.Program) (*Session, error) {
	r := Reserve(progs)
	s := &Session{engine: e, progs: map[string]*Executable{}}
	var err error
	if s.arena, err = e.ReserveArena("arena", r.Arena); err != nil {
		return nil, err
	}
	var scratch int64
	for _, p := range progs {
		scratch = max(scratch, p.Plan.Scratch)
	}
	if err := e.ReserveScratch(scratch); err != nil {
		s.Close()
		return nil, err
	}
	for _, p := range sortedPrograms(progs) {
		if _, err := s.Add(p); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// Add loads p into the session's arena (which must hold it). Its own
// buffers add to the ledger beyond what Open reserved.
func (s *Session) Add(p *compile.Program) (*Executable, error) {
	if s.progs[p.Name] != nil {
		return nil, fmt.Errorf("runtime: the session already holds a program %q", p.Name)
	}
	x, err := s.engine.LoadIn(p, s.arena)
	if err != nil {
		return nil, err
	}
	s.progs[p.Name] = x
	return x, nil
}

// Program returns the loaded program named name.
func (s *Session) Program(name string) (*Executable, bool) {
	x, ok := s.progs[name]
	return x, ok
}

// Engine returns the engine the session reserved on.
func (s *Session) Engine() *Engine { return s.engine }

// Close closes every program and releases the arena and (when no other
// program is loaded on the engine) the scratch; the variables stay on the
// engine, so a new session over the same engine continues from them.
func (s *Session) Close() {
	if s == nil || s.engine == nil {
		return
	}
	for _, x := range s.progs {
		x.Close()
	}
	s.progs = nil
	if s.arena != nil {
		s.arena.Release()
		s.arena = nil
	}
	if len(s.engine.loaded) == 0 {
		s.engine.ReleaseScratch()
	}
	s.engine = nil
}

// SetValues sets every variable that want accepts (nil: every variable)
// from value, by name, copying to the device where the backend is not the
// host. A variable value lacks, or gives with another dtype or shape, is an
// error naming it and nothing after it is written.
func (e *Engine) SetValues(value func(name string) (tensor.Tensor, bool), want func(*Variable) bool) error {
	if value == nil {
		return errors.New("runtime: no values given")
	}
	for _, v := range e.Variables() {
		if want != nil && !want(v) {
			continue
		}
		w, ok := value(v.Name)
		if !ok {
			return fmt.Errorf("runtime: no value for variable %q", v.Name)
		}
		if w.DType() != v.DType || !w.Shape().Equal(v.Shape) {
			return fmt.Errorf("runtime: variable %q is %s%v; the value given is %s%v", v.Name, v.DType, v.Shape, w.DType(), w.Shape())
		}
		if err := v.Write(w.Bytes()); err != nil {
			return fmt.Errorf("runtime: writing %q: %w", v.Name, err)
		}
	}
	return nil
}
