package compile

import (
	"errors"
	"fmt"

	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/mem"
)

// Output asks for a node's value to be kept readable after a step.
type Output struct {
	Name string
	Node *graph.Node
	// Grad puts the value in a persistent gradient buffer (ledger category
	// grad) rather than a workspace one.
	Grad bool
}

// Options configure Compile.
type Options struct {
	Name    string // names the program's arena in ledgers ("train", "eval")
	Outputs []Output
	// Budget, when > 0, is the most bytes the plan may need: a larger Peak
	// fails with *mem.OOMError before any memory is taken.
	Budget int64
	// Grads names gradient nodes that stay arena temporaries (consumed by
	// the update in the same step): the plan counts them as grad, not
	// workspace.
	Grads []*graph.Node
	// Target is the backend the program will run on (backend/cpu.New for
	// the host): compile asks it what it fuses, how much workspace each
	// instruction needs and what scratch its kernels hold, and folds
	// constants with it. It is required.
	Target         Target
	DisableInPlace bool // for tests and comparisons
	DisableFolding bool
	DisableFusion  bool
}

// Slot names a persistent buffer the runtime binds or exposes.
type Slot struct {
	Name   string
	Buffer int
	Node   *graph.Node
}

// Program is a compiled step: instructions over a buffer table, and the plan
// that places the buffers.
type Program struct {
	Name      string
	Graph     *graph.Graph
	Plan      *Plan
	Instrs    []Instr
	Inputs    []Slot // one per graph Input
	Variables []Slot // variables the step reads or assigns
	Outputs   []Slot
}

// Build runs build, recovering a *graph.Error it panics with, and compiles
// the graph it returns.
func Build(build func() (*graph.Graph, Options)) (*Program, error) {
	var g *graph.Graph
	var opt Options
	if err := graph.Catch(func() { g, opt = build() }); err != nil {
		return nil, err
	}
	return Compile(g, opt)
}

// Compile plans and lowers g. See the package documentation for the passes.
func Compile(g *graph.Graph, opt Options) (p *Program, err error) {
	defer func() {
		// A *graph.Error raised while folding or lowering (e.g. a bad attribute)
		// is returned; anything else is a bug and keeps panicking.
		if r := recover(); r != nil {
			if ge, ok := r.(*graph.Error); ok {
				p, err = nil, ge
				return
			}
			panic(r)
		}
	}()
	if g == nil {
		return nil, errors.New("compile: nil graph")
	}
	if opt.Name == "" {
		opt.Name = "step"
	}
	if opt.Target == nil {
		return nil, errors.New("compile: no Target (backend/cpu.New is the host's)")
	}
	for _, o := range opt.Outputs {
		if o.Node == nil || o.Node.Graph() != g {
			return nil, fmt.Errorf("compile: output %q is not a node of this graph", o.Name)
		}
	}
	roots := make([]*graph.Node, 0, len(opt.Outputs)+len(g.Assigns()))
	for _, o := range opt.Outputs {
		roots = append(roots, o.Node)
	}
	roots = append(roots, g.Assigns()...)
	live := prune(g, roots, nil)
	if err := checkAssigns(g, live); err != nil {
		return nil, err
	}
	if err := checkCollectives(g, live); err != nil {
		return nil, err
	}
	if err := checkSupport(g, live, opt.Target); err != nil {
		return nil, err
	}
	var konst map[int]constant
	if !opt.DisableFolding {
		konst, err = fold(g, live, opt.Target)
		if err != nil {
			return nil, err
		}
		live = prune(g, roots, konst)
	} else {
		konst = constants(g, live)
	}
	a := assignBuffers(g, live, konst, opt)
	plan := a.plan()
	prog := &Program{Name: opt.Name, Graph: g, Plan: plan}
	prog.Instrs = a.lower()
	if s := opt.Target.Scratch(prog.Instrs); s > 0 {
		plan.addScratch(opt.Target.Name(), s)
	}
	for _, n := range g.InputNodes() {
		prog.Inputs = append(prog.Inputs, Slot{Name: n.Attr().Name, Buffer: a.nodeBuf[n.ID()], Node: n})
	}
	for _, n := range g.Variables() {
		if b, ok := a.nodeBuf[n.ID()]; ok && live[n.ID()] {
			prog.Variables = append(prog.Variables, Slot{Name: n.Attr().Name, Buffer: b, Node: n})
		}
	}
	for _, o := range opt.Outputs {
		prog.Outputs = append(prog.Outputs, Slot{Name: o.Name, Buffer: a.nodeBuf[o.Node.ID()], Node: o.Node})
	}
	if opt.Budget > 0 && plan.Peak > opt.Budget {
		return nil, plan.OOM(opt.Name, opt.Budget)
	}
	return prog, nil
}

// OOM returns the error for a plan that does not fit budget: what it needs,
// the largest buffers by owner and the totals by category.
func (p *Plan) OOM(name string, budget int64) *mem.OOMError {
	e := &mem.OOMError{
		Ledger:      "plan " + name,
		Category:    mem.NumCategories, // the whole step, not one category
		Owner:       "step " + name,
		Request:     p.Peak,
		Budget:      budget,
		LargestFree: -1,
		Totals:      p.Totals,
		Top:         p.Top(8),
	}
	persistent := p.Peak - p.ArenaBytes
	if persistent >= budget {
		e.Remedies = append(e.Remedies, fmt.Sprintf("the persistent state alone (weights, gradients, optimizer state, inputs) needs %s: a smaller model or 16-bit state is needed", mem.FormatBytes(persistent)))
	} else {
		e.Remedies = append(e.Remedies, fmt.Sprintf("the step's arena needs %s and only %s is left after persistent state: a smaller batch, micro-batches or recomputation would fit", mem.FormatBytes(p.ArenaBytes), mem.FormatBytes(budget-persistent)))
	}
	return e
}
