package autodiff

import (
	"fmt"

	"github.com/headroom-ml/headroom/graph"
)

// The VJP table: one entry per op, set by a register call in the file of
// the op's family (elementwise.go, reduce.go, linalg.go, softmax.go,
// movement.go, conv.go, vision.go, sequence.go, collective.go,
// leaves.go). An entry is a rule, or the explicit statement that the op
// has none and why (an internal gradient op, a collective, a leaf).
// TestEveryOpHasAVJPEntry fails for an op without one.

// rule returns the gradient of the loss with respect to each input of n,
// given gy, the gradient with respect to n (nil for inputs without one). A
// rule reads forward values only through c.in(n, i) and c.val(n), so that
// they can be rematerialized.
type rule func(c *vjp, n, gy *graph.Node) []*graph.Node

// vjpEntry is how Grad differentiates one op.
type vjpEntry struct {
	rule rule
	// zero: the rule passes no gradient to any input (the op's gradient is
	// zero almost everywhere, or its inputs are not floats): the op is not
	// Differentiable, but Grad goes through it.
	zero bool
	// why the op has no rule (rule nil): Grad panics, naming the op, if a
	// loss is differentiated through it.
	why string
	// parts: the rule of a multi-output op also reads the gradients of its
	// parts (vjp.partGrad); gy may then be nil when only a part has one.
	// Without it a gradient through a part is refused.
	parts bool
}

var rules [graph.NumOps]vjpEntry

// register sets op's rule when the package initializes. A second
// registration of one op is a programming error.
func register(op graph.Op, r rule) { set(op, vjpEntry{rule: r}) }

// registerParts sets the rule of a multi-output op that differentiates
// through its parts too (vjpEntry.parts).
func registerParts(op graph.Op, r rule) { set(op, vjpEntry{rule: r, parts: true}) }

// registerZero gives ops a rule that passes no gradient.
func registerZero(ops ...graph.Op) {
	for _, op := range ops {
		set(op, vjpEntry{rule: none, zero: true})
	}
}

// registerNoRule records that ops have no rule, and why.
func registerNoRule(why string, ops ...graph.Op) {
	for _, op := range ops {
		set(op, vjpEntry{why: why})
	}
}

func set(op graph.Op, e vjpEntry) {
	if old := rules[op]; old.rule != nil || old.why != "" {
		panic(fmt.Sprintf("autodiff: op %s registered twice", op))
	}
	rules[op] = e
}

func none(c *vjp, n, gy *graph.Node) []*graph.Node { return nil }

// internal is why the gradient ops autodiff builds have no rule.
const internal = "an internal gradient op: headroom does not take second derivatives"

// Differentiable reports whether op has a VJP rule that passes gradients to
// some input (the gradient checks use it to prove they cover every rule).
func Differentiable(op graph.Op) bool {
	return op < graph.NumOps && rules[op].rule != nil && !rules[op].zero
}
