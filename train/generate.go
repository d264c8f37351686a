package train

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/headroom-ml/headroom/backend/cpu"
	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/runtime"
	"github.com/headroom-ml/headroom/step"
	"github.com/headroom-ml/headroom/tensor"
)

// decoder is a language model with a one-token decoding step (nn.GPT,
// nn.LSTMLM).
type decoder interface {
	Decoder() nn.Model
}

// Generator samples bytes from a language model (a model file of a gpt or
// an lstm) through an inference plan of one token per step: no optimizer
// state, no saved activations, and a cache of keys and values (the lstm's
// state) so that each byte costs O(window). Its memory is reserved once,
// by NewGenerator, and known before the first byte.
type Generator struct {
	engine  *runtime.Engine
	session *runtime.Session
	x       *runtime.Executable
	backend runtime.Backend
	// Plan is the decoding step's plan; Context the model's window.
	Plan    *compile.Plan
	Context int
	vocab   int
	cache   int64 // bytes of the cache (or state) variables

	tok, pos   tensor.Tensor // inputs (pos and mask only for the gpt)
	mask       []byte
	logits     tensor.Tensor
	at         int    // the next position in the cache
	window     []byte // the bytes in the cache, in order
	probs      []float64
	hasPos     bool
	stateBytes [][]byte            // the caches, zeroed when the window slides (a host backend)
	stateVars  []*runtime.Variable // the same on a device: zeroed by a copy of zeros
	zeros      []byte
	steps      int
	ownBackend bool // NewGenerator made the backend: Close closes it
}

// NewGenerator compiles mf's decoding step for the host with threads
// threads, reserves it under budget bytes (<= 0: none) and sets the
// weights.
func NewGenerator(mf *ModelFile, threads int, budget int64) (*Generator, error) {
	g, err := NewGeneratorOn(mf, cpu.New(threads), budget)
	if g != nil {
		g.ownBackend = true
	}
	return g, err
}

// NewGeneratorOn is NewGenerator on backend b (a GPU's: the caller closes
// it).
func NewGeneratorOn(mf *ModelFile, b runtime.Backend, budget int64) (_ *Generator, err error) {
	m, ok := mf.Model.(decoder)
	if !ok && mf.Registered != nil {
		if built, err := nn.NewModel(mf.Registered.Name, mf.Registered.Input, mf.Registered.Classes); err == nil {
			m, ok = built.(decoder)
		}
	}
	if !ok {
		return nil, fmt.Errorf("train: %s holds no language model with a decoding step (save one with 'headroom train --model gpt --dataset go-src --save FILE')", mf.Path)
	}
	in := mf.Model.Inputs()
	if len(in) != 1 || in[0].Shape.Rank() != 1 {
		return nil, fmt.Errorf("train: %s: a language model reads one window of tokens; this one reads %v", mf.Path, in)
	}
	g := &Generator{backend: b, Context: in[0].Shape[0]}
	defer func() {
		if err != nil {
			g.Close()
		}
	}()
	prog, err := step.Compile(step.Config{Model: m.Decoder(), Target: g.backend}, 1, step.Infer, (*step.Builder).Standard)
	if err != nil {
		return nil, err
	}
	prog.Name = "generate"
	g.Plan = prog.Plan
	if budget > 0 && prog.Plan.Peak > budget {
		oom := prog.Plan.OOM("generate", budget)
		oom.Ledger = "budget"
		return nil, oom
	}
	g.engine = runtime.NewEngine(g.backend, budget)
	if g.session, err = g.engine.Open(prog); err != nil {
		return nil, err
	}
	g.x, _ = g.session.Program(prog.Name)
	if err := g.engine.SetValues(mf.Weight, func(v *runtime.Variable) bool { return !isState(v.Name) }); err != nil {
		return nil, fmt.Errorf("train: %s: %w", mf.Path, err)
	}
	return g, g.bind()
}

// isState reports whether a decoder's variable is its cache or state (the
// decoder's own, not a trained weight).
func isState(name string) bool {
	return strings.HasPrefix(name, "cache/") || strings.HasPrefix(name, "state/")
}

// CacheBytes returns the bytes of the decoder's cache of keys and values
// (the lstm's state): part of the plan's parameters.
func (g *Generator) CacheBytes() int64 { return g.cache }

// Engine returns the engine holding the weights and the plan's memory.
func (g *Generator) Engine() *runtime.Engine { return g.engine }

// Steps returns the decoding steps run so far.
func (g *Generator) Steps() int { return g.steps }

// Close releases everything the generator reserved.
func (g *Generator) Close() {
	if g.engine != nil {
		g.session.Close()
		g.engine.Close()
		g.engine = nil
	}
	if cl, ok := g.backend.(interface{ Close() }); ok && g.ownBackend {
		cl.Close()
	}
}

func (g *Generator) bind() error {
	var err error
	if g.tok, err = g.x.Input("x"); err != nil {
		return err
	}
	if g.logits, err = g.x.Output("out"); err != nil {
		return err
	}
	g.vocab = g.logits.Len()
	if p, err := g.x.Input("pos"); err == nil {
		g.pos, g.hasPos = p, true
		m, err := g.x.Input("mask")
		if err != nil {
			return err
		}
		g.mask = m.Bytes()
	}
	for _, v := range g.engine.Variables() {
		if !isState(v.Name) {
			continue
		}
		if g.backend.HostAddressable() {
			g.stateBytes = append(g.stateBytes, v.Tensor().Bytes())
		} else {
			g.stateVars = append(g.stateVars, v)
			if int(v.Bytes()) > len(g.zeros) {
				g.zeros = make([]byte, v.Bytes())
			}
		}
		g.cache += mem.Align(v.Bytes())
	}
	g.probs = make([]float64, g.vocab)
	return nil
}

// Generate feeds prompt (a newline when empty) and samples n bytes at
// temperature (0: always the likeliest byte) with a generator seeded by
// seed.
func (g *Generator) Generate(prompt []byte, n int, temperature float64, seed uint64) ([]byte, error) {
	if n < 0 || !(temperature >= 0) || math.IsInf(temperature, 0) {
		return nil, errors.New("train: generate a number of bytes >= 0 at a finite temperature >= 0")
	}
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b9))
	if len(prompt) == 0 {
		prompt = []byte{'\n'}
	}
	for _, b := range prompt {
		if err := g.feed(b); err != nil {
			return nil, err
		}
	}
	out := make([]byte, 0, n)
	for len(out) < n {
		b := g.next(temperature, rng)
		out = append(out, b)
		if err := g.feed(b); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// feed runs one byte through the step at the next position. When the
// gpt's cache is full, its second half is fed again from position 0 (the
// learned positions end at the window): each byte still costs O(window).
func (g *Generator) feed(b byte) error {
	if g.hasPos && g.at == g.Context {
		keep := append([]byte(nil), g.window[len(g.window)-g.Context/2:]...)
		g.at, g.window = 0, g.window[:0]
		for _, st := range g.stateBytes {
			clear(st)
		}
		for _, v := range g.stateVars {
			if err := v.Write(g.zeros[:v.Bytes()]); err != nil {
				return err
			}
		}
		clear(g.mask)
		for _, k := range keep {
			if err := g.run(k); err != nil {
				return err
			}
		}
	}
	return g.run(b)
}

func (g *Generator) run(b byte) error {
	g.tok.Int32s()[0] = int32(b)
	if g.hasPos {
		g.pos.Int32s()[0] = int32(g.at)
		g.mask[g.at] = 1
	}
	if err := g.x.Run(); err != nil {
		return err
	}
	g.steps++
	g.at++
	g.window = append(g.window, b)
	return nil
}

// next samples a byte from the last step's logits at the temperature.
func (g *Generator) next(temp float64, rng *rand.Rand) byte {
	l := g.logits
	best := 0
	for i := 0; i < g.vocab; i++ {
		if l.Float64At(i) > l.Float64At(best) {
			best = i
		}
	}
	if temp == 0 {
		return byte(best)
	}
	var sum float64
	top := l.Float64At(best)
	for i := range g.probs {
		g.probs[i] = math.Exp((l.Float64At(i) - top) / temp)
		sum += g.probs[i]
	}
	r := rng.Float64() * sum
	for i, p := range g.probs {
		if r -= p; r < 0 {
			return byte(i)
		}
	}
	return byte(best)
}
