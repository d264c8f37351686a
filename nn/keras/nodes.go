package keras

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// ref names one tensor of a functional model as Keras' configs do:
// [layer, node_index, tensor_index], output tensor_index of the
// node_index-th call ("inbound node") of layer.
type ref struct {
	layer        string
	node, tensor int
	// shape is the tensor's shape as a Keras 3 file records it beside the
	// reference (batch included, null for unknown sizes); nil when absent.
	shape []any
}

func (r ref) String() string { return fmt.Sprintf("%s[%d][%d]", r.layer, r.node, r.tensor) }

// callSpec is one inbound node of a layer: the tensors one call took.
type callSpec struct {
	args  []ref            // positional tensor arguments, flattened in order
	named map[string][]ref // keyword arguments that hold tensors
	kw    map[string]any   // other keyword arguments
	// constants are the positional arguments that are constants (a Keras
	// 3 operation's x + 3.0), by their position in the call's argument
	// list; slots[i] is how many tensors of args position i holds. A
	// layer (not an operation) with constants is refused.
	constants map[int]any
	slots     []int
}

// maxCalls bounds the inbound nodes of one layer and the tensors of one.
const maxCalls = 1 << 16

// readNodes reads a layer's "inbound_nodes" in either format: Keras 2's
// lists of [name, node_index, tensor_index, kwargs] (kwargs are repeated on
// each tensor; arguments after the first are kwargs, with tensors written
// as [name, node_index, tensor_index]), or Keras 3's {"args": [...],
// "kwargs": {...}} with tensors as {"class_name": "__keras_tensor__",
// "config": {"keras_history": [...]}}. keras3 reports the second.
func readNodes(v any) (calls []callSpec, keras3 bool, err error) {
	if v == nil {
		return nil, false, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, false, fmt.Errorf("inbound_nodes: want a list, got %s", describe(v))
	}
	if len(list) > maxCalls {
		return nil, false, fmt.Errorf("inbound_nodes: more than %d calls", maxCalls)
	}
	for i, node := range list {
		var c callSpec
		var k3 bool
		switch n := node.(type) {
		case map[string]any:
			c, err = readNode3(n)
			k3 = true
		case []any:
			c, err = readNode2(n)
		default:
			err = fmt.Errorf("want a list or an object, got %s", describe(node))
		}
		if err != nil {
			return nil, false, fmt.Errorf("inbound_nodes[%d]: %w", i, err)
		}
		if i > 0 && k3 != keras3 {
			return nil, false, fmt.Errorf("inbound_nodes[%d]: Keras 2 and Keras 3 node formats mixed", i)
		}
		keras3 = k3
		calls = append(calls, c)
	}
	return calls, keras3, nil
}

// readNode2 reads a Keras 2 node: [[name, node, tensor, kwargs], ...].
func readNode2(n []any) (callSpec, error) {
	c := callSpec{named: map[string][]ref{}, kw: map[string]any{}}
	if len(n) == 0 {
		return c, errors.New("a call with no input tensors")
	}
	if len(n) > maxCalls {
		return c, fmt.Errorf("more than %d input tensors", maxCalls)
	}
	for j, t := range n {
		e, ok := t.([]any)
		if !ok || len(e) < 3 || len(e) > 4 {
			return c, fmt.Errorf("tensor %d: want [layer, node_index, tensor_index, kwargs], got %s", j, describe(t))
		}
		if s, _ := e[0].(string); s == "_CONSTANT_VALUE" {
			return c, unsupportedError("a constant passed as a layer's input (_CONSTANT_VALUE): headroom takes tensors from other layers only")
		}
		r, err := refOf(e[:3])
		if err != nil {
			return c, fmt.Errorf("tensor %d: %w", j, err)
		}
		c.args = append(c.args, r)
		if len(e) == 4 && j == 0 && e[3] != nil {
			kw, ok := e[3].(map[string]any)
			if !ok {
				return c, fmt.Errorf("tensor %d: kwargs: want an object, got %s", j, describe(e[3]))
			}
			for k, v := range kw {
				if refs, ok := refs2(v); ok {
					c.named[k] = refs
				} else {
					c.kw[k] = v
				}
			}
		}
	}
	return c, nil
}

// refs2 reads a Keras 2 keyword argument that holds a tensor
// ([name, node, tensor]) or a list of them; ok is false for other values.
func refs2(v any) ([]ref, bool) {
	l, ok := v.([]any)
	if !ok || len(l) == 0 {
		return nil, false
	}
	if r, err := refOf(l); err == nil {
		return []ref{r}, true
	}
	var out []ref
	for _, e := range l {
		el, ok := e.([]any)
		if !ok {
			return nil, false
		}
		r, err := refOf(el)
		if err != nil {
			return nil, false
		}
		out = append(out, r)
	}
	return out, true
}

// refOf reads [name, node_index, tensor_index].
func refOf(e []any) (ref, error) {
	if len(e) != 3 {
		return ref{}, fmt.Errorf("want [layer, node_index, tensor_index], got %s", describe(e))
	}
	name, ok := e[0].(string)
	if !ok {
		return ref{}, fmt.Errorf("layer: want a name, got %s", describe(e[0]))
	}
	node, err1 := toInt(e[1])
	tensor, err2 := toInt(e[2])
	if err1 != nil || err2 != nil || node < 0 || tensor < 0 || node > maxCalls || tensor > maxCalls {
		return ref{}, fmt.Errorf("%s: node and tensor index: want small non-negative integers, got %s and %s", name, describe(e[1]), describe(e[2]))
	}
	return ref{layer: name, node: node, tensor: tensor}, nil
}

// readNode3 reads a Keras 3 node: {"args": [...], "kwargs": {...}}.
func readNode3(n map[string]any) (callSpec, error) {
	c := callSpec{named: map[string][]ref{}, kw: map[string]any{}}
	count := 0
	// walk collects the tensors of v into out and returns a constant it
	// holds, if any (nil, the null of an absent argument, is none)
	var walk func(v any, out *[]ref, depth int) (constant any, err error)
	walk = func(v any, out *[]ref, depth int) (any, error) {
		if depth > maxDepth {
			return nil, errors.New("arguments nested too deeply")
		}
		switch t := v.(type) {
		case nil:
			return nil, nil
		case map[string]any:
			if cn, _ := t["class_name"].(string); cn == "__keras_tensor__" {
				conf, _ := t["config"].(map[string]any)
				h, ok := conf["keras_history"].([]any)
				if !ok {
					return nil, fmt.Errorf("a __keras_tensor__ without keras_history")
				}
				r, err := refOf(h)
				if err != nil {
					return nil, fmt.Errorf("keras_history: %w", err)
				}
				r.shape, _ = conf["shape"].([]any)
				if count++; count > maxCalls {
					return nil, fmt.Errorf("more than %d input tensors", maxCalls)
				}
				*out = append(*out, r)
				return nil, nil
			}
			var constant any
			for _, k := range sortedKeys(t) {
				cst, err := walk(t[k], out, depth+1)
				if err != nil {
					return nil, err
				}
				if constant == nil {
					constant = cst
				}
			}
			return constant, nil
		case []any:
			var constant any
			for _, e := range t {
				cst, err := walk(e, out, depth+1)
				if err != nil {
					return nil, err
				}
				if constant == nil {
					constant = cst
				}
			}
			return constant, nil
		}
		return v, nil
	}
	args, ok := n["args"].([]any)
	if !ok && n["args"] != nil {
		return c, fmt.Errorf("args: want a list, got %s", describe(n["args"]))
	}
	for i, a := range args {
		var refs []ref
		constant, err := walk(a, &refs, 0)
		if err != nil {
			return c, fmt.Errorf("args: %w", err)
		}
		if constant != nil {
			if len(refs) > 0 {
				return c, unsupportedError(fmt.Sprintf("a constant positional argument %s beside tensors in argument %d: headroom takes tensors from other layers, or a number", describe(constant), i))
			}
			if c.constants == nil {
				c.constants = map[int]any{}
			}
			c.constants[i] = constant
		}
		c.args = append(c.args, refs...)
		c.slots = append(c.slots, len(refs))
	}
	if len(c.args) == 0 {
		return c, errors.New("a call with no input tensors")
	}
	if v := n["kwargs"]; v != nil {
		kw, ok := v.(map[string]any)
		if !ok {
			return c, fmt.Errorf("kwargs: want an object, got %s", describe(v))
		}
		for _, k := range sortedKeys(kw) {
			var refs []ref
			if _, err := walk(kw[k], &refs, 0); err != nil {
				return c, fmt.Errorf("kwargs.%s: %w", k, err)
			}
			if len(refs) > 0 {
				c.named[k] = refs
			} else {
				c.kw[k] = kw[k]
			}
		}
	}
	return c, nil
}

// readRefs reads a model's input_layers or output_layers: a list of
// [name, node, tensor], one such triple (Keras 3 for a single tensor), or
// an object of them (Keras 3 dict inputs, flattened in sorted key order as
// Keras flattens them).
func readRefs(v any, what string) ([]ref, error) {
	switch t := v.(type) {
	case []any:
		if len(t) == 3 {
			if _, isName := t[0].(string); isName {
				r, err := refOf(t)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", what, err)
				}
				return []ref{r}, nil
			}
		}
		var out []ref
		for i, e := range t {
			l, ok := e.([]any)
			if !ok {
				return nil, fmt.Errorf("%s[%d]: want [layer, node_index, tensor_index], got %s", what, i, describe(e))
			}
			r, err := refOf(l)
			if err != nil {
				return nil, fmt.Errorf("%s[%d]: %w", what, i, err)
			}
			out = append(out, r)
		}
		return out, nil
	case map[string]any:
		var out []ref
		for _, k := range sortedKeys(t) {
			l, ok := t[k].([]any)
			if !ok {
				return nil, fmt.Errorf("%s.%s: want [layer, node_index, tensor_index], got %s", what, k, describe(t[k]))
			}
			r, err := refOf(l)
			if err != nil {
				return nil, fmt.Errorf("%s.%s: %w", what, k, err)
			}
			out = append(out, r)
		}
		return out, nil
	}
	return nil, fmt.Errorf("%s: want a list of [layer, node_index, tensor_index], got %s", what, describe(v))
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// inbound renders a call's tensors as Keras' summary's "Connected to".
func (c callSpec) inbound() string {
	var parts []string
	for _, r := range c.args {
		parts = append(parts, r.String())
	}
	for _, k := range sortedNamed(c.named) {
		for _, r := range c.named[k] {
			parts = append(parts, k+"="+r.String())
		}
	}
	return strings.Join(parts, ", ")
}

func sortedNamed(m map[string][]ref) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
