package keras

import (
	"fmt"
	"slices"
	"strings"

	"github.com/headroom-ml/headroom/nn"
)

// The layers of sequence models (nn/attention.go, nn/recurrent.go,
// nn/sequence.go), each with Keras' shape and parameter arithmetic.

// sequenceMapper returns the mapping of a one-input sequence layer class.
func sequenceMapper(class string) (func(name string, f *fields, in []int) mapped, bool) {
	switch class {
	case "Conv1D":
		return conv1D, true
	case "MaxPooling1D", "AveragePooling1D":
		return func(name string, f *fields, in []int) mapped { return pool1D(name, class == "MaxPooling1D", f, in) }, true
	case "GlobalAveragePooling1D", "GlobalMaxPooling1D":
		return func(name string, f *fields, in []int) mapped {
			return globalPool1D(name, class == "GlobalMaxPooling1D", f, in)
		}, true
	case "TimeDistributed":
		return timeDistributed, true
	case "PositionEmbedding":
		return positionEmbedding, true
	case "SinePositionEncoding":
		return sinePositionEncoding, true
	}
	return nil, false
}

// sequenceClasses are the classes mapped here, for Supported.
var sequenceClasses = []string{"MultiHeadAttention", "LSTM", "GRU", "SimpleRNN", "Bidirectional", "Conv1D",
	"MaxPooling1D", "AveragePooling1D", "GlobalAveragePooling1D", "GlobalMaxPooling1D", "TimeDistributed",
	"PositionEmbedding", "SinePositionEncoding"}

// sequence checks that in is one example of [T, C] input.
func sequence(f *fields, class string, in []int) bool {
	channelsLast(f)
	if len(in) != 2 {
		f.fail("%s needs an input of rank 2 (time, channels), got %v", class, in)
		return false
	}
	return f.err == nil
}

// single reads a Keras 1-D argument: 3 or [3].
func (f *fields) single(key string, def int, required bool) int {
	v, ok := f.get(key)
	if l, isList := v.([]any); ok && isList {
		if len(l) != 1 {
			f.fail("%s: want one value, got %d", key, len(l))
			return def
		}
		g := &fields{m: map[string]any{key: l[0]}}
		n := g.positive(key, def, true)
		if g.err != nil {
			f.fail("%v", g.err)
		}
		return n
	}
	return f.positive(key, def, required)
}

// conv1D: x [T, C] -> [OT, filters]; kernel [K, C, filters], bias [filters].
func conv1D(name string, f *fields, in []int) mapped {
	filters := f.positive("filters", 0, true)
	k := f.single("kernel_size", 0, true)
	s := f.single("strides", 1, false)
	pad := strings.ToLower(f.str("padding", "valid"))
	if pad != "valid" && pad != "same" && pad != "causal" {
		f.unsupported("padding %q is not supported: want valid, same or causal", pad)
	}
	if d := f.single("dilation_rate", 1, false); d != 1 {
		f.unsupported("dilation_rate %d is not supported: nn.Conv1D has dilation 1", d)
	}
	if g := f.positive("groups", 1, false); g != 1 {
		f.unsupported("groups=%d is not supported: nn.Conv1D has one group", g)
	}
	act := activation(f)
	bias := f.boolean("use_bias", true)
	if !sequence(f, "Conv1D", in) {
		return mapped{}
	}
	t := in[0]
	if pad == "causal" {
		t += k - 1
	}
	ot := graphOut(t, k, s, pad == "same")
	if ot <= 0 {
		f.fail("kernel %d does not fit input %v with %s padding", k, in, pad)
		return mapped{}
	}
	params, err := mulAll(k, in[1], filters)
	if err != nil {
		f.fail("kernel: %v", err)
		return mapped{}
	}
	if bias {
		params += filters
	}
	return mapped{layer: &nn.Conv1D{LayerName: name, Filters: filters, KernelSize: k, Strides: s, Padding: pad, Activation: act,
		NoBias: !bias, KernelInit: initializer(f, "kernel_initializer")}, out: []int{ot, filters}, params: params}
}

// graphOut is a window's output length with "valid" or "same" padding.
func graphOut(n, k, s int, same bool) int {
	if same {
		return (n + s - 1) / s
	}
	if n < k {
		return 0
	}
	return (n-k)/s + 1
}

// pool1D: [T, C] -> [OT, C]; strides default to the pool size.
func pool1D(name string, max bool, f *fields, in []int) mapped {
	p := f.single("pool_size", 2, false)
	s := f.single("strides", p, false)
	same := padding(f)
	if !sequence(f, "pooling", in) {
		return mapped{}
	}
	ot := graphOut(in[0], p, s, same)
	if ot <= 0 {
		f.fail("pool %d does not fit input %v with valid padding", p, in)
		return mapped{}
	}
	return mapped{layer: &nn.Pool1D{LayerName: name, Max: max, PoolSize: p, Strides: s, Same: same}, out: []int{ot, in[1]}}
}

// globalPool1D: [T, C] -> [C].
func globalPool1D(name string, max bool, f *fields, in []int) mapped {
	keep := f.boolean("keepdims", false)
	if !sequence(f, "global pooling", in) {
		return mapped{}
	}
	out := []int{in[1]}
	if keep {
		out = []int{1, in[1]}
	}
	return mapped{layer: &nn.GlobalPooling1D{LayerName: name, Max: max, KeepDims: keep}, out: out}
}

// timeDistributed maps "layer" (a one-input layer config) over every step
// of [T, ...]: -> [T, ...the layer's output]. The wrapped layer takes this
// layer's name, so its weights are "<name>/kernel" as Keras 2 names them.
func timeDistributed(name string, f *fields, in []int) mapped {
	inner, ok := innerLayer(f, "layer")
	if !ok {
		return mapped{}
	}
	if len(in) < 2 {
		f.fail("TimeDistributed needs an input of rank 2 or more (time, ...), got %v", in)
		return mapped{}
	}
	if _, multi := multiMapper(inner.class); multi || isModel(inner.class) || inner.class == "InputLayer" {
		f.unsupported("TimeDistributed of %s is not supported: it wraps a one-input layer", inner.written)
		return mapped{}
	}
	m := mapSingle(inner.class, name, inner.f, in[1:])
	if inner.f.err != nil {
		f.fail("layer %s: %v", inner.written, inner.f.err)
		return mapped{}
	}
	l, ok := m.layer.(nn.Layer)
	if !ok {
		f.unsupported("TimeDistributed of %s is not supported", inner.written)
		return mapped{}
	}
	return mapped{layer: &nn.TimeDistributed{LayerName: name, Layer: l}, out: append([]int{in[0]}, m.out...),
		params: m.params, nonTrainable: m.nonTrainable}
}

// innerLayer reads a wrapped layer's config ({"class_name": ..., "config":
// ...}) under key.
func innerLayer(f *fields, key string) (*entry, bool) {
	v, _ := f.get(key)
	lm, ok := v.(map[string]any)
	if !ok {
		f.fail("%s: want a layer config, got %s", key, describe(v))
		return nil, false
	}
	class, _ := lm["class_name"].(string)
	conf, ok := lm["config"].(map[string]any)
	if class == "" || !ok {
		f.fail("%s: want {\"class_name\": ..., \"config\": {...}}, got %s", key, describe(v))
		return nil, false
	}
	e := &entry{index: -1, class: class, written: class, f: &fields{m: conf, keras2: f.keras2}, raw: lm}
	if a, ok := aliases[class]; ok {
		e.class = a
	}
	e.name = e.f.str("name", snake(class))
	if err := refuse(e); err != nil {
		f.err = err
		return nil, false
	}
	return e, f.err == nil && e.f.err == nil
}

// positionEmbedding: keras_hub's learned positions, embeddings
// [sequence_length, C], returned broadcast to the input's shape.
func positionEmbedding(name string, f *fields, in []int) mapped {
	n := f.positive("sequence_length", 0, true)
	if !sequence(f, "PositionEmbedding", in) {
		return mapped{}
	}
	if in[0] > n {
		f.fail("an input of %d steps is longer than sequence_length %d", in[0], n)
		return mapped{}
	}
	params, err := mul(n, in[1])
	if err != nil {
		f.fail("embeddings: %v", err)
		return mapped{}
	}
	return mapped{layer: &nn.PositionEmbedding{LayerName: name, SequenceLength: n, Init: initializer(f, "initializer")}, out: in, params: params}
}

// sinePositionEncoding: keras_hub's sinusoidal positions, no weights.
func sinePositionEncoding(name string, f *fields, in []int) mapped {
	w := f.float("max_wavelength", 10000)
	if !(w > 0) {
		f.fail("max_wavelength %v: want a positive number", w)
	}
	if !sequence(f, "SinePositionEncoding", in) {
		return mapped{}
	}
	return mapped{layer: &nn.SinePositionEncoding{LayerName: name, MaxWavelength: w}, out: in}
}

// sequenceMulti returns the mapping of a sequence layer whose calls take
// several tensors or give several.
func sequenceMulti(class string) (func(name string, f *fields, in callIn) mapped, bool) {
	switch class {
	case "MultiHeadAttention":
		return attention, true
	case "LSTM", "GRU", "SimpleRNN":
		return func(name string, f *fields, in callIn) mapped { return recurrentCall(class, name, f, in) }, true
	case "Bidirectional":
		return bidirectional, true
	}
	return nil, false
}

// attention: query [Tq, dq], value [Tv, dv], key [Tv, dk] (the value
// without one), attention_mask [Tq, Tv] -> [Tq, output_shape] (and the
// scores [H, Tq, Tv] with return_attention_scores). Weights: query, key
// [d, H, key_dim] (+ bias [H, key_dim]), value [dv, H, value_dim],
// attention_output [H, value_dim, out] (+ bias [out]).
func attention(name string, f *fields, in callIn) mapped {
	heads := f.positive("num_heads", 0, true)
	keyDim := f.positive("key_dim", 0, true)
	valueDim := f.positive("value_dim", keyDim, false)
	rate := f.float("dropout", 0)
	bias := f.boolean("use_bias", true)
	if !(rate >= 0 && rate < 1) {
		f.fail("dropout %v is not in [0, 1)", rate)
	}
	if ax := f.axes("attention_axes", nil); ax != nil && !slices.Equal(ax, []int{1}) && !slices.Equal(ax, []int{-2}) {
		f.unsupported("attention_axes %v is not supported: nn.MultiHeadAttention attends over the time axis of [batch, time, features]", ax)
	}
	causal := in.kw.boolean("use_causal_mask", false)
	scores := in.kw.boolean("return_attention_scores", false)
	for _, k := range []string{"query_mask", "value_mask", "key_mask"} {
		if in.named[k] != nil {
			f.unsupported("%s is not supported: pass an attention_mask", k)
		}
	}
	if f.err != nil || in.kw.err != nil {
		return mapped{}
	}
	var feed []arg
	pick := func(pos int, key string) []int {
		if pos < len(in.shapes) {
			feed = append(feed, arg{pos: pos})
			return in.shapes[pos]
		}
		if s := in.named[key]; len(s) == 1 {
			feed = append(feed, arg{key: key})
			return s[0]
		}
		return nil
	}
	if len(in.shapes) > 3 {
		f.unsupported("MultiHeadAttention called with %d positional tensors: pass the masks by keyword", len(in.shapes))
		return mapped{}
	}
	q := pick(0, "query")
	v := pick(1, "value")
	if q == nil || v == nil {
		f.fail("MultiHeadAttention takes a query and a value")
		return mapped{}
	}
	k := pick(2, "key")
	keyInput := k != nil
	if !keyInput {
		k = v
	}
	mask := pick(99, "attention_mask")
	for _, x := range [][]int{q, v, k} {
		if len(x) != 2 {
			f.unsupported("MultiHeadAttention over inputs of shapes %v, %v, %v is not supported: nn's takes [time, features] per example", q, v, k)
			return mapped{}
		}
	}
	if k[0] != v[0] {
		f.fail("key %v and value %v must have the same length", k, v)
		return mapped{}
	}
	if mask != nil && !slices.Equal(mask, []int{q[0], v[0]}) && !slices.Equal(mask, []int{1, v[0]}) {
		f.fail("attention_mask %v: want [%d, %d] (query and value lengths)", mask, q[0], v[0])
		return mapped{}
	}
	out := q[1]
	if ov, ok := f.get("output_shape"); ok {
		switch t := ov.(type) {
		case []any:
			if len(t) != 1 {
				f.unsupported("output_shape %s is not supported: one size", describe(ov))
				return mapped{}
			}
			out = (&fields{m: map[string]any{"output_shape": t[0]}}).positive("output_shape", 0, true)
		default:
			out = f.positive("output_shape", 0, true)
		}
	}
	hk, err1 := mul(heads, keyDim)
	hv, err2 := mul(heads, valueDim)
	if err1 != nil || err2 != nil || out <= 0 {
		f.fail("num_heads %d, key_dim %d, value_dim %d: too large", heads, keyDim, valueDim)
		return mapped{}
	}
	params, err := sumProducts([][]int{{q[1], hk}, {k[1], hk}, {v[1], hv}, {hv, out}})
	if err != nil {
		f.fail("%v", err)
		return mapped{}
	}
	if bias {
		params += 2*hk + hv + out
	}
	m := mapped{layer: &nn.MultiHeadAttention{LayerName: name, NumHeads: heads, KeyDim: keyDim, ValueDim: valueDim, OutputDim: out,
		Dropout: rate, NoBias: !bias, UseCausalMask: causal, KeyInput: keyInput, MaskInput: mask != nil, ReturnScores: scores,
		KernelInit: initializer(f, "kernel_initializer")},
		outs: [][]int{{q[0], out}}, feed: feed, params: params}
	if scores {
		m.outs = append(m.outs, []int{heads, q[0], v[0]})
	}
	return m
}

// sumProducts returns Σ a·b, or an error above 2^40.
func sumProducts(pairs [][]int) (int, error) {
	total := 0
	for _, p := range pairs {
		n, err := mulAll(p...)
		if err != nil || total > maxElements-n {
			return 0, fmt.Errorf("the weights exceed 2^40 values")
		}
		total += n
	}
	return total, nil
}

// recurrentConfig reads the settings LSTM, GRU and SimpleRNN share.
type recurrentConfig struct {
	units                int
	act, rec             string
	bias, seqs, state    bool
	backwards            bool
	dropout, recDropout  float64
	gates                int // 4 (LSTM), 3 (GRU), 1
	states               int // 2 (LSTM), 1
	resetAfter           bool
	noUnitForgetBias     bool
	params, biasElements int
}

func readRecurrent(class string, f *fields, x []int) (recurrentConfig, bool) {
	r := recurrentConfig{gates: 1, states: 1}
	r.units = f.positive("units", 0, true)
	r.act = activationOf(f, "activation", "tanh")
	r.rec = "sigmoid"
	if class != "SimpleRNN" {
		r.rec = activationOf(f, "recurrent_activation", "sigmoid")
	}
	r.bias = f.boolean("use_bias", true)
	r.seqs = f.boolean("return_sequences", false)
	r.state = f.boolean("return_state", false)
	r.backwards = f.boolean("go_backwards", false)
	r.dropout, r.recDropout = f.float("dropout", 0), f.float("recurrent_dropout", 0)
	if !(r.dropout >= 0 && r.dropout < 1 && r.recDropout >= 0 && r.recDropout < 1) {
		f.fail("dropout %v, recurrent_dropout %v: want rates in [0, 1)", r.dropout, r.recDropout)
	}
	if f.boolean("stateful", false) {
		f.unsupported("stateful=true is not supported: headroom's recurrent layers start each batch from zero states (or given ones)")
	}
	if f.boolean("time_major", false) {
		f.unsupported("time_major=true is not supported: headroom's sequences are [batch, time, features]")
	}
	switch class {
	case "LSTM":
		r.gates, r.states = 4, 2
		r.noUnitForgetBias = !f.boolean("unit_forget_bias", true)
	case "GRU":
		r.gates = 3
		r.resetAfter = f.boolean("reset_after", !f.keras2)
	}
	if f.err != nil {
		return r, false
	}
	if len(x) != 2 {
		f.fail("%s needs an input of rank 2 (time, features), got %v", class, x)
		return r, false
	}
	gu, err := mul(r.gates, r.units)
	if err == nil {
		r.params, err = sumProducts([][]int{{x[1], gu}, {r.units, gu}})
	}
	if err != nil {
		f.fail("%v", err)
		return r, false
	}
	if r.bias {
		r.biasElements = gu
		if r.resetAfter {
			r.biasElements = 2 * gu
		}
		r.params += r.biasElements
	}
	return r, true
}

// layer returns the nn layer of class for r (nn's three share their
// settings' fields).
func (r recurrentConfig) layer(class, name string, f *fields, initial bool) nn.MultiLayer {
	kinit, rinit := initializer(f, "kernel_initializer"), initializer(f, "recurrent_initializer")
	switch class {
	case "LSTM":
		l := &nn.LSTM{NoUnitForgetBias: r.noUnitForgetBias}
		l.LayerName, l.Units, l.Activation, l.RecurrentActivation, l.NoBias = name, r.units, r.act, r.rec, !r.bias
		l.ReturnSequences, l.ReturnState, l.GoBackwards, l.InitialState = r.seqs, r.state, r.backwards, initial
		l.Dropout, l.RecurrentDropout, l.KernelInit, l.RecurrentInit = r.dropout, r.recDropout, kinit, rinit
		return l
	case "GRU":
		l := &nn.GRU{NoResetAfter: !r.resetAfter}
		l.LayerName, l.Units, l.Activation, l.RecurrentActivation, l.NoBias = name, r.units, r.act, r.rec, !r.bias
		l.ReturnSequences, l.ReturnState, l.GoBackwards, l.InitialState = r.seqs, r.state, r.backwards, initial
		l.Dropout, l.RecurrentDropout, l.KernelInit, l.RecurrentInit = r.dropout, r.recDropout, kinit, rinit
		return l
	}
	l := &nn.SimpleRNN{}
	l.LayerName, l.Units, l.Activation, l.NoBias = name, r.units, r.act, !r.bias
	l.ReturnSequences, l.ReturnState, l.GoBackwards, l.InitialState = r.seqs, r.state, r.backwards, initial
	l.Dropout, l.RecurrentDropout, l.KernelInit, l.RecurrentInit = r.dropout, r.recDropout, kinit, rinit
	return l
}

// outs returns the output shapes of one direction: the output ([T, units]
// or [units]) and, with return_state, the states.
func (r recurrentConfig) outs(t int) [][]int {
	o := [][]int{{r.units}}
	if r.seqs {
		o = [][]int{{t, r.units}}
	}
	if r.state {
		for range r.states {
			o = append(o, []int{r.units})
		}
	}
	return o
}

// recurrentCall: x [T, in] and optional initial states -> the output and,
// with return_state, the final states.
func recurrentCall(class, name string, f *fields, in callIn) mapped {
	if len(in.shapes) == 0 {
		f.fail("%s takes a sequence", class)
		return mapped{}
	}
	x := in.shapes[0]
	r, ok := readRecurrent(class, f, x)
	if !ok {
		return mapped{}
	}
	feed, initial, ok := initialStates(f, class, in, r.states, r.units)
	if !ok {
		return mapped{}
	}
	return mapped{layer: r.layer(class, name, f, initial), outs: r.outs(x[0]), feed: feed, params: r.params}
}

// initialStates returns the feed of x and its initial states: positional
// after x, or the initial_state keyword argument (states of [units] each).
func initialStates(f *fields, class string, in callIn, states, units int) ([]arg, bool, bool) {
	feed := []arg{{pos: 0}}
	var shapes [][]int
	for i := 1; i < len(in.shapes); i++ {
		feed = append(feed, arg{pos: i})
		shapes = append(shapes, in.shapes[i])
	}
	for k, s := range in.named {
		if k != "initial_state" {
			f.unsupported("%s's keyword tensor %s is not supported (masks are not)", class, k)
			return nil, false, false
		}
		for i := range s {
			feed = append(feed, arg{key: k, pos: i})
			shapes = append(shapes, s[i])
		}
	}
	if len(shapes) == 0 {
		return feed, false, true
	}
	if len(shapes) != states {
		f.fail("%s takes %d initial states, got %d", class, states, len(shapes))
		return nil, false, false
	}
	for _, s := range shapes {
		if !slices.Equal(s, []int{units}) {
			f.fail("an initial state of %s must be [%d], got %v", class, units, s)
			return nil, false, false
		}
	}
	return feed, true, true
}

// bidirectional: a recurrent "layer" read forwards and (a copy, or
// "backward_layer") backwards, merged by merge_mode (concat, sum, mul,
// ave, or null: two outputs).
func bidirectional(name string, f *fields, in callIn) mapped {
	inner, ok := innerLayer(f, "layer")
	if !ok {
		return mapped{}
	}
	if inner.class != "LSTM" && inner.class != "GRU" && inner.class != "SimpleRNN" {
		f.unsupported("Bidirectional of %s is not supported: it wraps an LSTM, GRU or SimpleRNN", inner.written)
		return mapped{}
	}
	if f.has("backward_layer") {
		f.unsupported("backward_layer is not supported: the backward layer is a copy of the forward one")
		return mapped{}
	}
	mode := "concat" // Keras' default; null: two outputs
	if v, present := f.m["merge_mode"]; present {
		mode = "none"
		if v != nil {
			mode, _ = v.(string)
		}
	}
	switch mode {
	case "concat", "sum", "mul", "ave", "none":
	default:
		f.unsupported("merge_mode %s is not supported: concat, sum, mul, ave or null", describe(f.m["merge_mode"]))
		return mapped{}
	}
	if len(in.shapes) == 0 {
		f.fail("Bidirectional takes a sequence")
		return mapped{}
	}
	x := in.shapes[0]
	r, ok := readRecurrent(inner.class, inner.f, x)
	if !ok {
		f.fail("layer %s: %v", inner.written, inner.f.err)
		return mapped{}
	}
	feed, initial, ok := initialStates(f, "Bidirectional", in, 2*r.states, r.units)
	if !ok {
		return mapped{}
	}
	one := r.outs(x[0])
	out := slices.Clone(one[0])
	var outs [][]int
	switch mode {
	case "concat":
		out[len(out)-1] *= 2
		outs = [][]int{out}
	case "none":
		outs = [][]int{out, slices.Clone(out)}
	default:
		outs = [][]int{out}
	}
	for range 2 {
		outs = append(outs, one[1:]...)
	}
	return mapped{layer: &nn.Bidirectional{LayerName: name, Layer: r.layer(inner.class, inner.name, inner.f, initial), MergeMode: mode},
		outs: outs, feed: feed, params: 2 * r.params}
}
