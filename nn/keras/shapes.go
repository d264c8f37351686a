package keras

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Shapes that vary. A Keras config may leave a dimension of an input
// unknown (null, Python's None): a sequence of any length, (None, None,
// 71), or an image of any size. headroom plans fixed shapes, so the size
// is given when the model is read: WithInputShape names an input and its
// shape, WithSeq the length of every input's first axis after the batch
// (a sequence's time axis). A size the file states must agree with the
// one given; a dimension still unknown is an error that says how to give
// it.

// unknown is a dimension a file leaves null.
const unknown = -1

// Option changes how Parse and Load read a model.
type Option func(*options)

// options are the settings Options make.
type options struct {
	shapes map[string][]int // per-example shapes by input name; "" for the only input
	seq    int              // the first axis after the batch, where unknown; 0: not given
}

// WithInputShape gives the input named name (an InputLayer's name; "" for
// a model with one input) the per-example shape (no batch dimension). It
// fixes the dimensions the file leaves unknown and must agree with those
// it states.
func WithInputShape(name string, shape []int) Option {
	return func(o *options) {
		if o.shapes == nil {
			o.shapes = map[string][]int{}
		}
		o.shapes[name] = slices.Clone(shape)
	}
}

// WithSeq gives the first axis after the batch of every input (a
// sequence's time axis) the length t where the file leaves it unknown.
func WithSeq(t int) Option { return func(o *options) { o.seq = t } }

// ParseInputShape reads an input shape as --input-shape writes it:
// NAME=DxDx..., or DxDx... alone for a model's only input (name ""); each
// D a positive size, the batch left out ("encoder_inputs=20x71").
func ParseInputShape(s string) (name string, shape []int, err error) {
	dimsText := s
	if i := strings.LastIndexByte(s, '='); i >= 0 {
		name, dimsText = s[:i], s[i+1:]
		if name == "" {
			return "", nil, fmt.Errorf("input shape %q: the name before = is empty", s)
		}
	}
	if dimsText == "" {
		return "", nil, fmt.Errorf("input shape %q: want NAME=DxD... (sizes without the batch), as 20x71", s)
	}
	parts := strings.Split(dimsText, "x")
	if len(parts) > maxRank {
		return "", nil, fmt.Errorf("input shape %q: rank %d exceeds the maximum %d", s, len(parts), maxRank)
	}
	size := 1
	for _, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > maxInt32 {
			return "", nil, fmt.Errorf("input shape %q: %q is not a positive size", s, p)
		}
		if size > maxElements/n {
			return "", nil, fmt.Errorf("input shape %q holds more than 2^40 values per example", s)
		}
		size *= n
		shape = append(shape, n)
	}
	return name, shape, nil
}

// inputShapes resolves the shapes of a model's inputs. It records which
// given shapes were used, so that a name the model does not have is an
// error, not silently ignored.
type inputShapes struct {
	opts   options
	single bool            // the top-level model has one input: "" names it
	used   map[string]bool // names of opts.shapes that matched an input
	names  []string        // every input met, for messages
}

// fix returns s (a per-example shape read from the file, unknown
// dimensions as -1) of the input name with its unknown dimensions given;
// where says which key of the file it comes from. top is false for the
// input of a nested model (given by name only).
func (in *inputShapes) fix(name, where string, s []int, top bool) ([]int, error) {
	out, err := in.apply(name, where, s, top)
	if err != nil {
		return nil, err
	}
	for i, d := range out {
		if d != unknown {
			continue
		}
		hint := "--input-shape " + name + "=" + strings.ReplaceAll(strings.Trim(fmt.Sprint(exampleShape(out)), "[]"), " ", "x")
		if i == 0 {
			hint += ", or --seq T for a sequence's length"
		}
		var others []string
		for k := range in.opts.shapes {
			if k != "" && k != name {
				others = append(others, k)
			}
		}
		if len(others) > 0 {
			sort.Strings(others)
			hint += "; shapes were given for " + strings.Join(others, ", ") + ", not for " + name
		}
		return nil, fmt.Errorf("input %s: dimension %d of %s %s is unknown (null); headroom plans fixed shapes: give it a size (%s)",
			name, i+1, where, shapeText(s), hint)
	}
	return out, nil
}

// apply returns s with the sizes given for the input name (and --seq's)
// in place of its unknown dimensions, leaving those none gives unknown:
// the input of a nested model, whose first call gives them.
func (in *inputShapes) apply(name, where string, s []int, top bool) ([]int, error) {
	if !slices.Contains(in.names, name) {
		in.names = append(in.names, name)
	}
	out := slices.Clone(s)
	given, ok := in.opts.shapes[name]
	key := name
	if !ok && top && in.single {
		given, ok = in.opts.shapes[""]
		key = ""
	}
	if ok {
		if in.used == nil {
			in.used = map[string]bool{}
		}
		in.used[key] = true
		if len(given) != len(s) {
			return nil, fmt.Errorf("input %s: the shape given, %v, has rank %d; %s has rank %d (%s), the batch left out",
				name, given, len(given), where, len(s), shapeText(s))
		}
		for i, d := range s {
			if d != unknown && d != given[i] {
				return nil, fmt.Errorf("input %s: the shape given, %v, disagrees with %s, %s: dimension %d is %d",
					name, given, where, shapeText(s), i+1, d)
			}
		}
		out = slices.Clone(given)
	}
	if len(out) > 0 && out[0] == unknown && in.opts.seq > 0 && top {
		out[0] = in.opts.seq
	}
	size := 1
	for _, d := range out {
		if d == unknown {
			continue
		}
		if size > maxElements/d {
			return nil, fmt.Errorf("input %s: %v holds more than 2^40 values per example", name, out)
		}
		size *= d
	}
	return out, nil
}

// unused returns an error naming a given shape that matched no input.
func (in *inputShapes) unused() error {
	var names []string
	for k := range in.opts.shapes {
		if !in.used[k] {
			names = append(names, k)
		}
	}
	if len(names) == 0 {
		return nil
	}
	sort.Strings(names)
	if names[0] == "" {
		return fmt.Errorf("an input shape without a name was given, but the model has %d inputs (%s): name it, NAME=DxD...", len(in.names), strings.Join(in.names, ", "))
	}
	return errors.New("an input shape was given for " + strings.Join(names, ", ") + ", which the model does not have; its inputs: " + strings.Join(in.names, ", "))
}

// shapeText renders a per-example shape with the batch, unknown
// dimensions as None, as Keras prints it: (None, None, 71).
func shapeText(s []int) string {
	parts := []string{"None"}
	for _, d := range s {
		if d == unknown {
			parts = append(parts, "None")
		} else {
			parts = append(parts, strconv.Itoa(d))
		}
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// exampleShape fills unknown dimensions with a placeholder size for a
// hint: T for the first, D for the others.
func exampleShape(s []int) []string {
	out := make([]string, len(s))
	for i, d := range s {
		switch {
		case d != unknown:
			out[i] = strconv.Itoa(d)
		case i == 0:
			out[i] = "T"
		default:
			out[i] = "D"
		}
	}
	return out
}
