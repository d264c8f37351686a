package onnx

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

// DefaultOpset is the ONNX opset Write targets when Options.Opset is 0.
const DefaultOpset = 17

// The opsets Write can target.
const (
	MinOpset = 17
	MaxOpset = 21
)

// BatchDim is the name of the symbolic batch dimension of the exported
// inputs and outputs.
const BatchDim = "N"

// Output names a value of the graph that the exported model returns.
type Output struct {
	Name string
	Node *graph.Node
}

// Model is what Write exports: an inference graph, the nodes it is fed
// and returns, and the values of its weights.
type Model struct {
	Graph *graph.Graph
	// Inputs are the Input nodes the model is fed, in order; dimension 0 of
	// each is the batch, exported as the symbolic BatchDim. Nil: every Input
	// node the outputs depend on, in id order.
	Inputs  []*graph.Node
	Outputs []Output
	// Weights returns a Variable's value by name; the export writes it as
	// an initializer.
	Weights func(name string) (tensor.Tensor, bool)
	// Doc is the model's doc_string; Metadata becomes its metadata_props
	// (e.g. "classes": a JSON list of class names).
	Doc      string
	Metadata map[string]string
}

// Options configure Write.
type Options struct {
	Opset int // MinOpset..MaxOpset; 0: DefaultOpset
	// Int8, when set, quantizes the model after training (see Int8Options).
	Int8 *Int8Options
	// ProducerVersion is written as the model's producer_version.
	ProducerVersion string
}

// UnsupportedError is returned for a graph node Write has no ONNX
// translation for.
type UnsupportedError struct {
	Op    graph.Op
	Owner string // the node's owner, e.g. "dense/softmax_cross_entropy"
	Why   string // why the op or this use of it is not exportable (empty: the op has no entry at all)
}

func (e *UnsupportedError) Error() string {
	if e.Why == "" {
		return fmt.Sprintf("onnx: op %s (in %s) has no ONNX translation", e.Op, e.Owner)
	}
	return fmt.Sprintf("onnx: op %s (in %s): %s", e.Op, e.Owner, e.Why)
}

// Write exports m as an ONNX model (a ModelProto) to w.
func Write(w io.Writer, m Model, opt Options) error {
	mp, err := build(m, opt)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	if _, err := bw.Write(mp.marshal(nil)); err != nil {
		return fmt.Errorf("onnx: writing the model: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("onnx: writing the model: %w", err)
	}
	return nil
}

// irVersion returns the ONNX IR version that came with opset (onnx's
// docs/Versioning.md): 8 for opsets 17-18, 9 for 19-20, 10 for 21.
func irVersion(opset int) int64 {
	switch {
	case opset <= 18:
		return 8
	case opset <= 20:
		return 9
	}
	return 10
}

// converter holds the state of one export.
type converter struct {
	m     Model
	opset int
	int8  *Int8Options
	batch int   // the graph's batch size: dimension 0 of its inputs
	axis  []int // per node id: the axis of its value that is the batch (-1: none)
	value []string
	gp    graphProto
	names map[string]bool   // every value and node name used
	inits map[string]string // initializer cache key -> name
	qdq   map[string]string // activation value -> its dequantized copy
	// scales of the dequantized values: per tensor (activations) or per
	// output channel (weights); a folded bias is quantized with their product
	scales map[string][]float32
	uses   [][]*graph.Node // per node id: the live nodes that read it
	// fused holds values computed by the ONNX nodes of an earlier node (a
	// bias Add folded into its Conv), by node id
	fused map[int]string
	cur   *graph.Node // the node being exported (names its nodes)
}

func build(m Model, opt Options) (*modelProto, error) {
	c, err := newConverter(m, opt)
	if err != nil {
		return nil, err
	}
	live := liveNodes(c.m)
	for _, n := range m.Graph.Nodes() {
		if live[n.ID()] {
			for _, in := range n.Inputs() {
				c.uses[in.ID()] = append(c.uses[in.ID()], n)
			}
		}
	}
	for _, n := range m.Graph.Nodes() {
		if !live[n.ID()] {
			continue
		}
		if err := c.export(n); err != nil {
			return nil, err
		}
	}
	for _, o := range m.Outputs {
		name := o.Name
		v, err := c.valueOf(o.Node)
		if err != nil {
			return nil, fmt.Errorf("onnx: output %q: %w", name, err)
		}
		c.gp.Node = append(c.gp.Node, &nodeProto{OpType: "Identity", Name: name + "/identity",
			Input: []string{v}, Output: []string{name}})
		c.gp.Output = append(c.gp.Output, c.valueInfo(name, o.Node))
	}
	mp := &modelProto{
		IRVersion:       irVersion(c.opset),
		ProducerName:    "headroom",
		ProducerVersion: opt.ProducerVersion,
		DocString:       m.Doc,
		Graph:           &c.gp,
		OpsetImport:     []opsetID{{Version: int64(c.opset)}},
	}
	keys := make([]string, 0, len(m.Metadata))
	for k := range m.Metadata {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		mp.MetadataProps = append(mp.MetadataProps, stringStringKV{k, m.Metadata[k]})
	}
	return mp, nil
}

func newConverter(m Model, opt Options) (*converter, error) {
	if m.Graph == nil {
		return nil, errors.New("onnx: nil graph")
	}
	if len(m.Outputs) == 0 {
		return nil, errors.New("onnx: no outputs")
	}
	opset := opt.Opset
	if opset == 0 {
		opset = DefaultOpset
	}
	if opset < MinOpset || opset > MaxOpset {
		return nil, fmt.Errorf("onnx: opset %d not supported (want %d..%d)", opset, MinOpset, MaxOpset)
	}
	seen := map[string]bool{}
	for _, o := range m.Outputs {
		if o.Node == nil || o.Node.Graph() != m.Graph {
			return nil, fmt.Errorf("onnx: output %q is not a node of the graph", o.Name)
		}
		if o.Name == "" || seen[o.Name] {
			return nil, fmt.Errorf("onnx: output name %q is empty or repeated", o.Name)
		}
		seen[o.Name] = true
	}
	if opt.Int8 != nil && opt.Int8.Ranges == nil {
		return nil, errors.New("onnx: int8 export without calibrated ranges (see Calibrate)")
	}
	c := &converter{m: m, opset: opset, int8: opt.Int8, batch: -1,
		axis: make([]int, m.Graph.Len()), value: make([]string, m.Graph.Len()),
		names: map[string]bool{}, inits: map[string]string{}, qdq: map[string]string{},
		scales: map[string][]float32{}, uses: make([][]*graph.Node, m.Graph.Len()), fused: map[int]string{}}
	for i := range c.axis {
		c.axis[i] = -1
	}
	c.gp.Name = "headroom"
	c.m.Inputs = modelInputs(m)
	for _, n := range c.m.Inputs {
		if n == nil || n.Graph() != m.Graph || n.Op() != graph.OpInput {
			return nil, fmt.Errorf("onnx: model input %v is not an Input node of the graph", n)
		}
		name := n.Attr().Name
		if n.Shape().Rank() == 0 {
			return nil, fmt.Errorf("onnx: input %q is a scalar: it has no batch dimension", name)
		}
		if c.batch < 0 {
			c.batch = n.Shape()[0]
		} else if n.Shape()[0] != c.batch {
			return nil, fmt.Errorf("onnx: input %q has batch %d, input %q has %d", name, n.Shape()[0], c.m.Inputs[0].Attr().Name, c.batch)
		}
		if c.names[name] || seen[name] {
			return nil, fmt.Errorf("onnx: input name %q is repeated or also an output's", name)
		}
		c.names[name] = true
		c.value[n.ID()] = name
		c.axis[n.ID()] = 0
		c.gp.Input = append(c.gp.Input, c.valueInfo(name, n))
	}
	for _, o := range m.Outputs {
		c.names[o.Name] = true // reserved for the outputs
	}
	return c, nil
}

// liveNodes marks the nodes m's outputs depend on, by id.
func liveNodes(m Model) []bool {
	live := make([]bool, m.Graph.Len())
	for _, o := range m.Outputs {
		if o.Node != nil && o.Node.Graph() == m.Graph {
			live[o.Node.ID()] = true
		}
	}
	for id := len(live) - 1; id >= 0; id-- {
		if live[id] {
			for _, in := range m.Graph.Node(id).Inputs() {
				live[in.ID()] = true
			}
		}
	}
	return live
}

// modelInputs returns m.Inputs, or if it is nil the Input nodes m's outputs
// depend on.
func modelInputs(m Model) []*graph.Node {
	if m.Inputs != nil {
		return m.Inputs
	}
	live := liveNodes(m)
	var out []*graph.Node
	for _, n := range m.Graph.InputNodes() {
		if live[n.ID()] {
			out = append(out, n)
		}
	}
	return out
}

// export translates one node: its batch axis, then its ONNX nodes.
func (c *converter) export(n *graph.Node) error {
	r := rules[n.Op()]
	if r.emit == nil { // not exportable (Why says why), or no entry at all
		return &UnsupportedError{Op: n.Op(), Owner: n.Owner(), Why: r.why}
	}
	if n.Op() == graph.OpInput {
		if !slices.Contains(c.m.Inputs, n) {
			return fmt.Errorf("onnx: the outputs depend on input %q, which is not one of the model's inputs", n.Attr().Name)
		}
	}
	c.cur = n
	ax, err := r.batch(c, n)
	if err != nil {
		return c.wrap(n, err)
	}
	c.axis[n.ID()] = ax
	if v, ok := c.fused[n.ID()]; ok {
		c.value[n.ID()] = v
		return nil
	}
	v, err := r.emit(c, n)
	if err != nil {
		return c.wrap(n, err)
	}
	c.value[n.ID()] = v
	return nil
}

func (c *converter) wrap(n *graph.Node, err error) error {
	var ue *UnsupportedError
	if errors.As(err, &ue) {
		return err
	}
	return fmt.Errorf("onnx: op %s (in %s): %w", n.Op(), n.Owner(), err)
}

// unsupported returns the error for a node whose attributes or shapes have
// no ONNX translation.
func unsupported(n *graph.Node, format string, args ...any) error {
	return &UnsupportedError{Op: n.Op(), Owner: n.Owner(), Why: fmt.Sprintf(format, args...)}
}

// unique returns name, or name with a numeric suffix if it is taken, and
// reserves it.
func (c *converter) unique(name string) string {
	if name == "" {
		name = "v"
	}
	out := name
	for i := 1; c.names[out]; i++ {
		out = fmt.Sprintf("%s_%d", name, i)
	}
	c.names[out] = true
	return out
}

// node appends an ONNX node of the current graph node and returns its
// output's name, made from the node's owner and suffix.
func (c *converter) node(opType, suffix string, inputs []string, attrs ...*attribute) string {
	base := c.cur.Owner()
	if suffix != "" {
		base += "/" + suffix
	}
	out := c.unique(base)
	c.gp.Node = append(c.gp.Node, &nodeProto{OpType: opType, Name: out, Input: inputs, Output: []string{out}, Attribute: attrs})
	return out
}

// nodeN is node for an ONNX op with several outputs: it lists the first
// n, the first named as node names it, the others after it with the
// suffixes "output1", "output2" and so on, and returns their names.
func (c *converter) nodeN(opType, suffix string, n int, inputs []string, attrs ...*attribute) []string {
	out := []string{c.node(opType, suffix, inputs, attrs...)}
	nd := c.gp.Node[len(c.gp.Node)-1]
	for i := 1; i < n; i++ {
		out = append(out, c.unique(fmt.Sprintf("%s/output%d", out[0], i)))
	}
	nd.Output = out
	return out
}

// valueInfo describes a graph input or output: n's dtype and shape, with the
// batch axis symbolic.
func (c *converter) valueInfo(name string, n *graph.Node) valueInfo {
	vi := valueInfo{Name: name, ElemType: elemType(n.DType())}
	ax, param := c.batchParam(n)
	for i, d := range n.Shape() {
		vi.Dims = append(vi.Dims, int64(d))
		if i == ax {
			vi.Params = append(vi.Params, param)
		} else {
			vi.Params = append(vi.Params, "")
		}
	}
	return vi
}

// elemType returns the TensorProto.DataType of d (0 for none).
func elemType(d tensor.DType) int32 {
	switch d {
	case tensor.Float32:
		return dtFloat
	case tensor.Float64:
		return dtDouble
	case tensor.Float16:
		return dtFloat16
	case tensor.BFloat16:
		return dtBFloat16
	case tensor.Int32:
		return dtInt32
	case tensor.Int64:
		return dtInt64
	case tensor.Uint8:
		return dtUint8
	case tensor.Bool:
		return dtBool
	}
	return 0
}
