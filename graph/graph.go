package graph

import (
	"fmt"
	"strings"

	"github.com/headroom-ml/headroom/internal/site"
	"github.com/headroom-ml/headroom/tensor"
)

// Phase says which part of a training step built a node.
type Phase uint8

// The phases.
const (
	Forward  Phase = iota // the model and its loss
	Backward              // gradients, built by autodiff
	Update                // optimizer updates
)

func (p Phase) String() string { return [...]string{"forward", "backward", "update"}[p] }

// Role says what a Variable holds; the planner maps it to a ledger category.
type Role uint8

// The roles.
const (
	RoleParam    Role = iota // trainable weights
	RoleGrad                 // accumulated gradients
	RoleOptState             // optimizer state
)

func (r Role) String() string { return [...]string{"param", "grad", "optstate"}[r] }

// Graph holds nodes in the order they were built. It is not safe for
// concurrent building.
type Graph struct {
	nodes   []*Node
	scope   []string
	phase   Phase
	vars    map[string]*Node
	inputs  map[string]*Node
	assigns []*Node
	guard   *Node  // see SetGuard
	site    string // see SetSite
	bf16    bool   // see BF16Products
}

// New returns an empty graph.
func New(opts ...Option) *Graph {
	g := &Graph{vars: map[string]*Node{}, inputs: map[string]*Node{}}
	for _, o := range opts {
		o(g)
	}
	return g
}

// Option sets a property of a whole graph when it is made (New): it holds
// for every node, so no node depends on when it was built.
type Option func(*Graph)

// BF16Products makes the graph's float32 products (MatMul, Conv2D and its
// backprop ops) run on bfloat16 operands with float32 sums, as JAX's
// default dot precision on TPUs and PyTorch's bfloat16 autocast: the
// mixed_bfloat16 policy's compute, forward and backward.
func BF16Products() Option { return func(g *Graph) { g.bf16 = true } }

// Node is one value of a graph. Nodes are immutable once built.
type Node struct {
	g      *Graph
	id     int
	op     Op
	inputs []*Node
	shape  tensor.Shape
	dtype  tensor.DType
	attr   Attr
	owner  string
	phase  Phase
	site   string
}

// Attr holds the attributes of every op; each op reads only its own fields.
type Attr struct {
	Name     string        // Input, Variable: the unique name
	Role     Role          // Variable
	Value    tensor.Tensor // Constant
	Axes     []int         // reductions (sorted, unique)
	KeepDims bool          // reductions
	Perm     []int         // Transpose
	TransA   bool          // MatMul: use a's transpose
	TransB   bool          // MatMul: use b's transpose
	Starts   []int         // Slice, Unslice
	Ends     []int         // Slice
	Axis     int           // Concat
	Depth    int           // OneHot
	Window   [2]int        // pooling window; conv: the filter's [KH, KW]
	Strides  [2]int        // conv, pooling
	Same     bool          // conv, pooling: "same" padding (else "valid")
	Of       tensor.Shape  // backprop ops: the shape of the forward input or filter
	Rate     float64       // DropoutMask: the fraction dropped
	Seed     uint64        // DropoutMask
	// BF16: MatMul, Conv2D and its backprop ops round their float32
	// operands to bfloat16 and sum the products in float32 (see
	// BF16Products).
	BF16 bool

	// sequence ops' fields
	Scale  float64 // Attention: the scores' scale (usually 1/√D)
	Causal Causal  // Attention: which keys a query sees besides the mask
	Part   int     // Part: which further output of its input (1, 2, ...)
	Eps    float64 // LayerNorm: added to the variance
	// vision ops (vision.go)
	Dilation [2]int     // Conv2D, its gradients, Conv2DTranspose: dilation rate (0: 1)
	Groups   int        // the same: filter groups (0: 1)
	Act      [4]float64 // the parameters of an activation op (see its builder); ImageTransform's options
}

// ID returns the node's position in the graph (inputs have smaller ids).
func (n *Node) ID() int { return n.id }

// Graph returns the graph that holds n.
func (n *Node) Graph() *Graph { return n.g }

// Op returns the node's op.
func (n *Node) Op() Op { return n.op }

// Inputs returns the node's inputs. The caller must not modify the slice.
func (n *Node) Inputs() []*Node { return n.inputs }

// Shape returns the node's shape. The caller must not modify it.
func (n *Node) Shape() tensor.Shape { return n.shape }

// DType returns the node's element type.
func (n *Node) DType() tensor.DType { return n.dtype }

// Attr returns the node's attributes. The caller must not modify them.
func (n *Node) Attr() *Attr { return &n.attr }

// Owner returns the scope path and op that name the node in plans and
// ledgers, e.g. "dense1/matmul", or the variable or input name.
func (n *Node) Owner() string { return n.owner }

// Phase returns the phase that built the node.
func (n *Node) Phase() Phase { return n.phase }

// Site returns "file:line" of the user code that built the node.
func (n *Node) Site() string { return n.site }

// Bytes returns the size of the node's value in bytes.
func (n *Node) Bytes() int64 { return int64(n.shape.Size() * n.dtype.Size()) }

func (n *Node) String() string {
	return fmt.Sprintf("%%%d %s %s%v (%s)", n.id, n.op, n.dtype, n.shape, n.owner)
}

// Nodes returns every node in id order. The caller must not modify the slice.
func (g *Graph) Nodes() []*Node { return g.nodes }

// Node returns the node with the given id.
func (g *Graph) Node(id int) *Node { return g.nodes[id] }

// Len returns the number of nodes.
func (g *Graph) Len() int { return len(g.nodes) }

// Assigns returns the Assign nodes in the order they were built.
func (g *Graph) Assigns() []*Node { return g.assigns }

// LookupVariable returns the variable named name, if any.
func (g *Graph) LookupVariable(name string) (*Node, bool) { n, ok := g.vars[name]; return n, ok }

// LookupInput returns the input named name, if any.
func (g *Graph) LookupInput(name string) (*Node, bool) { n, ok := g.inputs[name]; return n, ok }

// Variables returns every Variable node in id order.
func (g *Graph) Variables() []*Node { return g.leaves(OpVariable) }

// InputNodes returns every Input node in id order.
func (g *Graph) InputNodes() []*Node { return g.leaves(OpInput) }

func (g *Graph) leaves(op Op) []*Node {
	var out []*Node
	for _, n := range g.nodes {
		if n.op == op {
			out = append(out, n)
		}
	}
	return out
}

// PushScope enters a name scope: nodes built until the matching PopScope are
// owned by "outer/.../name/op".
func (g *Graph) PushScope(name string) { g.scope = append(g.scope, name) }

// PopScope leaves the innermost scope.
func (g *Graph) PopScope() {
	if len(g.scope) == 0 {
		panic("graph: PopScope without PushScope")
	}
	g.scope = g.scope[:len(g.scope)-1]
}

// SetScope replaces the whole scope path by path (nodes built from now on
// are owned by "path/.../op") and returns the previous one, for a later
// SetScope to restore: what is built for a layer but belongs elsewhere
// (ZeRO-3's gathers of its parameters) names its own owner.
func (g *Graph) SetScope(path ...string) []string {
	old := g.scope
	g.scope = append([]string(nil), path...)
	return old
}

// Scope returns the current scope path ("" at the top).
func (g *Graph) Scope() string { return strings.Join(g.scope, "/") }

// SetPhase sets the phase recorded on nodes built from now on and returns
// the previous one.
func (g *Graph) SetPhase(p Phase) Phase { old := g.phase; g.phase = p; return old }

// SetSite makes nodes built from now on record site instead of their
// caller's file:line ("" restores that), and returns the previous setting:
// autodiff gives a gradient op the site of the op it differentiates.
func (g *Graph) SetSite(site string) string { old := g.site; g.site = site; return old }

// CurrentPhase returns the phase nodes are built in now.
func (g *Graph) CurrentPhase() Phase { return g.phase }

// add appends a node. Callers have checked shapes and dtypes.
func (g *Graph) add(op Op, dtype tensor.DType, shape tensor.Shape, attr Attr, inputs ...*Node) *Node {
	switch op {
	case OpMatMul, OpConv2D, OpConv2DBackpropInput, OpConv2DBackpropFilter:
		attr.BF16 = g.bf16 && dtype == tensor.Float32
	}
	for _, in := range inputs {
		if in.g != g {
			throw(op, "input %s belongs to another graph", in)
		}
	}
	owner := op.String()
	if attr.Name != "" {
		owner = attr.Name
	} else if s := g.Scope(); s != "" {
		owner = s + "/" + owner
	}
	n := &Node{g: g, id: len(g.nodes), op: op, inputs: inputs, shape: shape.Clone(), dtype: dtype,
		attr: attr, owner: owner, phase: g.phase, site: g.site}
	if n.site == "" {
		n.site = callSite()
	}
	if n.shape == nil {
		n.shape = tensor.Shape{}
	}
	g.nodes = append(g.nodes, n)
	return n
}

// callSite returns file:line of the code that built a node: the first
// caller outside headroom's graph machinery, so plans point at a layer's
// Forward (nn's or the user's) or the user's own graph code.
func callSite() string {
	return site.Caller(2, func(fn string) bool {
		return site.InPackages(fn, "graph", "autodiff", "optim", "step", "train", "compile")
	})
}

// Error is a mistake found while building a graph: a shape or dtype
// mismatch, a bad axis, a duplicate name. It names the op and the operands.
type Error struct {
	Op    Op
	Owner string // the scope the node was being built in
	Site  string // the user's file:line
	Msg   string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("graph: ")
	b.WriteString(e.Op.String())
	if e.Owner != "" {
		b.WriteString(" in ")
		b.WriteString(e.Owner)
	}
	if e.Site != "" {
		b.WriteString(" at ")
		b.WriteString(e.Site)
	}
	b.WriteString(": ")
	b.WriteString(e.Msg)
	return b.String()
}

func throw(op Op, format string, args ...any) {
	panic(&Error{Op: op, Site: callSite(), Msg: fmt.Sprintf(format, args...)})
}

func (g *Graph) throw(op Op, format string, args ...any) {
	panic(&Error{Op: op, Owner: g.Scope(), Site: callSite(), Msg: fmt.Sprintf(format, args...)})
}

// Catch runs build and returns, as an error, a *Error that it panicked with.
// Any other panic is not recovered: it is a bug, not bad input.
func Catch(build func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if ge, ok := r.(*Error); ok {
				err = ge
				return
			}
			panic(r)
		}
	}()
	build()
	return nil
}
