package cpu

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/headroom-ml/headroom/kernels"
)

// program is a compiled program bound to host memory.
type program struct {
	name    string
	bound   []Bound
	pool    *kernels.Pool    // the backend's: the kernels' threads
	scratch *kernels.Scratch // the engine's scratch: the products' packing buffers
	ran     *atomic.Bool     // the backend's: set when a program of it runs
}

// Run executes every instruction in order, each through the kernel bound
// to it, with the engine's scratch as the products' packing buffers. It
// allocates nothing unless a step fails on bad data.
func (p *program) Run() error {
	p.started()
	if p.scratch != nil {
		p.pool.SetScratch(p.scratch) // the engine's: another may have run on the pool
	}
	for i := range p.bound {
		if err := p.bound[i].run(); err != nil {
			// all-reduces in flight complete before the step returns: their
			// buffers are the arena's, and the other processes wait for them
			if aerr := abandon(p.bound); aerr != nil {
				err = fmt.Errorf("%w (and completing the all-reduces in flight: %w)", err, aerr)
			}
			return err
		}
	}
	return nil
}

// started marks the backend's measuring over: one of its programs runs
// (Target.BindHost times nothing after).
func (p *program) started() {
	if !p.ran.Load() {
		p.ran.Store(true)
	}
}

// RunTimed runs the program as Run does and adds each instruction's time
// to d[i] (len(d) == the instructions). It allocates nothing.
func (p *program) RunTimed(d []time.Duration) error {
	if len(d) != len(p.bound) {
		return fmt.Errorf("cpu: RunTimed of %q: %d durations for %d instructions", p.name, len(d), len(p.bound))
	}
	p.started()
	if p.scratch != nil {
		p.pool.SetScratch(p.scratch)
	}
	for i := range p.bound {
		s := time.Now()
		err := p.bound[i].run()
		d[i] += time.Since(s)
		if err != nil {
			if aerr := abandon(p.bound); aerr != nil {
				err = fmt.Errorf("%w (and completing the all-reduces in flight: %w)", err, aerr)
			}
			return err
		}
	}
	return nil
}

// Kernel names the kernel instruction i runs where there is a choice: a
// float32 convolution's algorithm ("direct", "im2col", "winograd", "winograd4") or
// matrix product's ("packed", "packed1", "tiles", "tiles1", or
// "prepacked" for a product of a group sharing one packing of its second
// operand, packed.go); "" elsewhere.
func (p *program) Kernel(i int) string {
	b := &p.bound[i]
	if b.prepacked {
		return "prepacked"
	}
	if b.mmAlgo != nil {
		return b.mmAlgo.String()
	}
	if b.algo == nil {
		return ""
	}
	if *b.algo != kernels.ConvAuto {
		return b.algo.String()
	}
	return kernels.ConvRule(b.convKind, kernels.ConvGeom(b.Window.Geom), b.Window.F).String()
}

// AllReduceTimes returns how long the program's all-reduces took and how
// long it waited for them, over every run so far.
func (p *program) AllReduceTimes() (took, waited time.Duration) { return allReduceTimes(p.bound) }

// Close takes the program's scratch from the pool, before its memory is
// freed.
func (p *program) Close() {
	if p.scratch != nil {
		p.pool.ReleaseScratch(p.scratch)
		p.scratch = nil
	}
}
