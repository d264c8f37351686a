package keras

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Limits that keep every count in range of an int, so a hostile or broken
// file is an error, not an overflow: no dimension or config integer above
// maxInt32, no tensor or parameter total above maxElements (2^40, about
// 1.1e12 values: six times GPT-3).
const (
	maxInt32    = 1<<31 - 1
	maxElements = 1 << 40
)

// fields reads one JSON object (a layer's "config", a model's "config")
// with sticky errors: the first problem is kept and later reads return
// defaults, so a layer's mapping reads straight through and is checked once.
// A key whose value is JSON null reads as absent (Keras writes null for
// "default").
type fields struct {
	m   map[string]any
	err error
	// keras2 is set for configs Keras 2 (or TensorFlow.js) wrote: the few
	// names whose meaning changed in Keras 3 (hard_sigmoid) read as Keras 2's.
	keras2 bool
}

func (f *fields) fail(format string, args ...any) {
	if f.err == nil {
		f.err = fmt.Errorf(format, args...)
	}
}

// unsupported records an error that errors.Is matches with ErrUnsupported.
func (f *fields) unsupported(format string, args ...any) {
	if f.err == nil {
		f.err = unsupportedError(fmt.Sprintf(format, args...))
	}
}

func (f *fields) get(key string) (any, bool) {
	v, ok := f.m[key]
	return v, ok && v != nil
}

func (f *fields) has(key string) bool {
	_, ok := f.get(key)
	return ok
}

func (f *fields) str(key, def string) string {
	v, ok := f.get(key)
	if !ok {
		return def
	}
	s, isStr := v.(string)
	if !isStr {
		f.fail("%s: want a string, got %s", key, describe(v))
		return def
	}
	return s
}

func (f *fields) boolean(key string, def bool) bool {
	v, ok := f.get(key)
	if !ok {
		return def
	}
	b, isBool := v.(bool)
	if !isBool {
		f.fail("%s: want true or false, got %s", key, describe(v))
		return def
	}
	return b
}

func (f *fields) float(key string, def float64) float64 {
	v, ok := f.get(key)
	if !ok {
		return def
	}
	n, isNum := v.(json.Number)
	if !isNum {
		f.fail("%s: want a number, got %s", key, describe(v))
		return def
	}
	x, err := n.Float64()
	if err != nil || math.IsInf(x, 0) || math.IsNaN(x) {
		f.fail("%s: %s is not a finite number", key, n)
		return def
	}
	return x
}

// positive reads an integer in [1, maxInt32]; required keys must be present.
func (f *fields) positive(key string, def int, required bool) int {
	v, ok := f.get(key)
	if !ok {
		if required {
			f.fail("%s is missing", key)
		}
		return def
	}
	n, err := toInt(v)
	if err == nil && (n < 1 || n > maxInt32) {
		err = fmt.Errorf("%d is not in [1, %d]", n, maxInt32)
	}
	if err != nil {
		f.fail("%s: %v", key, err)
		return def
	}
	return n
}

// pair reads Keras' int-or-tuple arguments (kernel_size, strides,
// pool_size, dilation_rate): 3 or [3, 3], each in [1, maxInt32].
func (f *fields) pair(key string, def [2]int, required bool) [2]int {
	v, ok := f.get(key)
	if !ok {
		if required {
			f.fail("%s is missing", key)
		}
		return def
	}
	var out [2]int
	switch t := v.(type) {
	case json.Number:
		n, err := toInt(t)
		if err != nil || n < 1 || n > maxInt32 {
			f.fail("%s: want a positive integer or a pair of them, got %s", key, t)
			return def
		}
		return [2]int{n, n}
	case []any:
		if len(t) != 2 {
			f.fail("%s: want 2 values (height, width), got %d", key, len(t))
			return def
		}
		for i, e := range t {
			n, err := toInt(e)
			if err != nil || n < 1 || n > maxInt32 {
				f.fail("%s[%d]: want a positive integer, got %s", key, i, describe(e))
				return def
			}
			out[i] = n
		}
		return out
	}
	f.fail("%s: want an integer or a pair, got %s", key, describe(v))
	return def
}

// axes reads an axis argument written as an int or a list of ints.
func (f *fields) axes(key string, def []int) []int {
	v, ok := f.get(key)
	if !ok {
		return def
	}
	list, isList := v.([]any)
	if !isList {
		list = []any{v}
	}
	out := make([]int, 0, len(list))
	for _, e := range list {
		n, err := toInt(e)
		if err != nil || n < -maxInt32 || n > maxInt32 {
			f.fail("%s: want an integer axis or a list of them, got %s", key, describe(v))
			return def
		}
		out = append(out, n)
	}
	return out
}

// toInt converts a JSON number that holds an integer (3 or 3.0).
func toInt(v any) (int, error) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, fmt.Errorf("want an integer, got %s", describe(v))
	}
	if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
		if i > math.MaxInt32*4 || i < -math.MaxInt32*4 {
			return 0, fmt.Errorf("%s is out of range", n)
		}
		return int(i), nil
	}
	x, err := n.Float64()
	if err != nil || x != math.Trunc(x) || math.Abs(x) > math.MaxInt32*4 {
		return 0, fmt.Errorf("want an integer, got %s", n)
	}
	return int(x), nil
}

// batchShape reads a shape that counts the batch dimension ([null, 28, 28,
// 1]) and returns it without the batch; a dimension left unknown (null)
// is -1 (unknown), for the caller to fix (inputShapes.fix).
func batchShape(v any) ([]int, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("want a list such as [null, 28, 28, 1], got %s", describe(v))
	}
	if len(list) < 2 {
		return nil, fmt.Errorf("%s has no dimension besides the batch", describe(v))
	}
	if list[0] != nil {
		if n, err := toInt(list[0]); err != nil || n < 1 {
			return nil, fmt.Errorf("batch dimension %s is not null or a positive integer", describe(list[0]))
		}
	}
	return dims(list[1:], 1)
}

// dims reads positive sizes, or null (unknown, -1); first is the index the
// first one has in the shape written in the file (for messages).
func dims(list []any, first int) ([]int, error) {
	if len(list) > maxRank {
		return nil, fmt.Errorf("rank %d (besides the batch) exceeds the maximum %d", len(list), maxRank)
	}
	out := make([]int, len(list))
	size := 1
	for i, e := range list {
		if e == nil {
			out[i] = unknown
			continue
		}
		n, err := toInt(e)
		if err != nil || n < 1 || n > maxInt32 {
			return nil, fmt.Errorf("dimension %d: want a positive integer or null, got %s", i+first, describe(e))
		}
		out[i] = n
		if size > maxElements/n {
			return nil, fmt.Errorf("%v holds more than 2^40 values per example", out[:i+1])
		}
		size *= n
	}
	return out, nil
}

// describe renders a JSON value briefly for error messages.
func describe(v any) string {
	switch t := v.(type) {
	case nil:
		return "null"
	case string:
		if len(t) > 40 {
			t = t[:40] + "..."
		}
		return strconv.Quote(t)
	case json.Number:
		return string(t)
	case bool:
		return strconv.FormatBool(t)
	case []any:
		b, _ := json.Marshal(t)
		if len(b) > 60 {
			return fmt.Sprintf("a list of %d values", len(t))
		}
		return string(b)
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// dtypeName returns the dtype a layer's "dtype" names: a string
// ("float32"), or a policy object as Keras 3 ({"class_name": "DTypePolicy",
// "config": {"name": "float32"}}) and Keras 2 mixed precision ("Policy")
// write it. Absent or null is "". A 16-bit float policy (float16,
// bfloat16, mixed_float16, mixed_bfloat16) reads as "float32": headroom
// plans a model in float32 and its precision itself (--precision), so
// such a model plans as its float32 twin.
func dtypeName(f *fields) string {
	v, ok := f.get("dtype")
	if !ok {
		return ""
	}
	name := ""
	switch t := v.(type) {
	case string:
		name = t
	case map[string]any:
		if c, ok := t["config"].(map[string]any); ok {
			name, _ = c["name"].(string)
		}
		if name == "" {
			name, _ = t["name"].(string)
		}
	}
	switch name {
	case "float16", "bfloat16", "mixed_float16", "mixed_bfloat16":
		return "float32"
	case "":
	default:
		return name
	}
	f.fail("dtype: want a string or a DTypePolicy object, got %s", describe(v))
	return ""
}

// snake turns CamelCase and camelCase names into Keras' snake_case
// ("SparseCategoricalCrossentropy" -> "sparse_categorical_crossentropy").
func snake(s string) string {
	var b strings.Builder
	for i, r := range s {
		if r >= 'A' && r <= 'Z' {
			if i > 0 && s[i-1] != '_' {
				b.WriteByte('_')
			}
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}
