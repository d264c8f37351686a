package keras

import (
	"fmt"
	"sort"
	"strings"

	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/optim"
)

// Training is what a file's training configuration asks for: Keras'
// compile() arguments as a Keras 2 training_config, a Keras 3
// compile_config or a TensorFlow.js trainingConfig records them.
type Training struct {
	// Optimizer is the optimizer's class as written ("Adam"), "" when the
	// file names none; NewOptimizer maps it.
	Optimizer string
	optimizer map[string]any // its config, keys in snake_case
	// Losses are the outputs' losses, in output order; an output without a
	// loss (a loss dict that leaves it out) is not listed.
	Losses []OutputLoss
}

// OutputLoss is one output's loss as the file names it.
type OutputLoss struct {
	Output int
	Name   string  // Keras' snake_case ("sparse_categorical_crossentropy")
	Weight float64 // loss_weights' entry, 1 without
	// Reduction is a loss object's reduction ("" or sum_over_batch_size:
	// the mean, headroom's).
	Reduction string
}

// readTraining reads the first training configuration among candidates
// that names a loss or an optimizer; outputs names the model's outputs
// (for a loss or loss_weights dict). nil when none does.
func readTraining(candidates []any, outputs []string) (*Training, error) {
	for _, c := range candidates {
		m, ok := c.(map[string]any)
		if !ok || (m["loss"] == nil && m["optimizer"] == nil && m["optimizer_config"] == nil) {
			continue
		}
		t := &Training{}
		if err := t.readOptimizer(firstOf(m["optimizer_config"], m["optimizer"])); err != nil {
			return nil, fmt.Errorf("training config: optimizer: %w", err)
		}
		if err := t.readLosses(m["loss"], m["loss_weights"], outputs); err != nil {
			return nil, fmt.Errorf("training config: %w", err)
		}
		return t, nil
	}
	return nil, nil
}

func firstOf(vs ...any) any {
	for _, v := range vs {
		if v != nil {
			return v
		}
	}
	return nil
}

// readOptimizer reads "adam", {"class_name": "Adam", "config": {...}}
// (Keras 2, 3, TensorFlow.js with camelCase keys), or TensorFlow 2.11+'s
// "Custom>Adam".
func (t *Training) readOptimizer(v any) error {
	switch o := v.(type) {
	case nil:
		return nil
	case string:
		t.Optimizer, t.optimizer = o, map[string]any{}
		return nil
	case map[string]any:
		class, ok := o["class_name"].(string)
		if !ok {
			return fmt.Errorf("class_name: want a string, got %s", describe(o["class_name"]))
		}
		t.Optimizer = class
		t.optimizer = map[string]any{}
		if c := o["config"]; c != nil {
			conf, ok := c.(map[string]any)
			if !ok {
				return fmt.Errorf("config: want an object, got %s", describe(c))
			}
			for k, v := range conf {
				t.optimizer[optimizerKey(k)] = v
			}
		}
		return nil
	}
	return fmt.Errorf("want a name or an object, got %s", describe(v))
}

// optimizerKey spells a setting as Keras 3 does: TensorFlow.js writes
// camelCase (learningRate, beta1, useNesterov), Keras 2 "lr".
func optimizerKey(k string) string {
	k = snake(k)
	switch k {
	case "lr":
		return "learning_rate"
	case "beta1":
		return "beta_1"
	case "beta2":
		return "beta_2"
	case "use_nesterov":
		return "nesterov"
	}
	return k
}

// readLosses reads loss (a name, a serialized function or class, a list
// per output or a dict by output name; one loss for several outputs is
// every output's) and loss_weights (a list or a dict).
func (t *Training) readLosses(loss, weights any, outputs []string) error {
	n := len(outputs)
	names := make([]string, n)
	reductions := make([]string, n)
	has := make([]bool, n)
	switch l := loss.(type) {
	case nil:
		return nil
	case []any:
		if len(l) == 1 && n != 1 { // one loss for every output
			loss = l[0]
			break
		}
		if len(l) != n {
			return fmt.Errorf("loss: %d losses for %d outputs", len(l), n)
		}
		for i, e := range l {
			if e == nil {
				continue
			}
			name, red, err := lossName(e)
			if err != nil {
				return fmt.Errorf("loss[%d]: %w", i, err)
			}
			names[i], reductions[i], has[i] = name, red, true
		}
	case map[string]any:
		if _, isObj := l["class_name"]; isObj {
			break // a serialized loss, not a dict by output
		}
		for _, k := range sortedKeys(l) {
			i := indexOf(outputs, k)
			if i < 0 {
				return fmt.Errorf("loss: %q is not an output of the model (outputs: %s)", k, strings.Join(outputs, ", "))
			}
			if l[k] == nil {
				continue
			}
			name, red, err := lossName(l[k])
			if err != nil {
				return fmt.Errorf("loss.%s: %w", k, err)
			}
			names[i], reductions[i], has[i] = name, red, true
		}
	}
	if !anyTrue(has) {
		name, red, err := lossName(loss)
		if err != nil {
			return fmt.Errorf("loss: %w", err)
		}
		for i := range names {
			names[i], reductions[i], has[i] = name, red, true
		}
	}
	w := make([]float64, n)
	for i := range w {
		w[i] = 1
	}
	switch lw := weights.(type) {
	case nil:
	case []any:
		if len(lw) != n {
			return fmt.Errorf("loss_weights: %d weights for %d outputs", len(lw), n)
		}
		for i, e := range lw {
			x, err := weight(e)
			if err != nil {
				return fmt.Errorf("loss_weights[%d]: %w", i, err)
			}
			w[i] = x
		}
	case map[string]any:
		for _, k := range sortedKeys(lw) {
			i := indexOf(outputs, k)
			if i < 0 {
				return fmt.Errorf("loss_weights: %q is not an output of the model (outputs: %s)", k, strings.Join(outputs, ", "))
			}
			x, err := weight(lw[k])
			if err != nil {
				return fmt.Errorf("loss_weights.%s: %w", k, err)
			}
			w[i] = x
		}
	default:
		return fmt.Errorf("loss_weights: want a list or an object, got %s", describe(weights))
	}
	for i := range names {
		if has[i] {
			t.Losses = append(t.Losses, OutputLoss{Output: i, Name: names[i], Weight: w[i], Reduction: reductions[i]})
		}
	}
	return nil
}

func weight(v any) (float64, error) {
	f := &fields{m: map[string]any{"w": v}}
	x := f.float("w", 1)
	if f.err == nil && x < 0 {
		f.fail("%v is negative", x)
	}
	return x, f.err
}

func indexOf(list []string, s string) int {
	for i, e := range list {
		if e == s {
			return i
		}
	}
	return -1
}

func anyTrue(bs []bool) bool {
	for _, b := range bs {
		if b {
			return true
		}
	}
	return false
}

// lossName reads a loss written as a name ("categorical_crossentropy",
// TensorFlow.js' "categoricalCrossentropy", "keras.losses.mse"), a
// serialized function (Keras 3: {"class_name": "function", "config":
// "sparse_categorical_crossentropy"}) or a serialized loss object
// ({"class_name": "SparseCategoricalCrossentropy", "config": {...}}), and
// the object's reduction.
func lossName(v any) (name, reduction string, err error) {
	switch t := v.(type) {
	case string:
		if i := strings.LastIndexByte(t, '.'); i >= 0 {
			t = t[i+1:]
		}
		if strings.ToLower(t) != t {
			t = snake(t)
		}
		return lossAlias(t), "", nil
	case map[string]any:
		class, _ := t["class_name"].(string)
		if s, ok := t["config"].(string); ok && (class == "function" || class == "") {
			name, _, err := lossName(s)
			return name, "", err
		}
		if class == "" || class == "function" {
			return "", "", fmt.Errorf("a loss object without a class_name or function name: %s", describe(v))
		}
		if c, ok := t["config"].(map[string]any); ok {
			reduction, _ = c["reduction"].(string)
		}
		class = strings.TrimPrefix(class, "Custom>")
		name, _, err := lossName(class)
		return name, reduction, err
	case []any:
		if len(t) == 1 {
			return lossName(t[0])
		}
	}
	return "", "", fmt.Errorf("want a loss name or a serialized loss, got %s", describe(v))
}

// lossAlias maps the class form of a loss onto its function name.
func lossAlias(class string) string {
	switch class {
	case "mean_squared_error":
		return "mse"
	case "mean_absolute_error":
		return "mae"
	}
	return class
}

// NNLoss returns nn's loss for a Keras loss name. Keras'
// categorical_crossentropy (one-hot labels) becomes the sparse form:
// headroom's data sets label examples with class indices.
func NNLoss(name string) (nn.Loss, error) {
	switch name {
	case "sparse_categorical_crossentropy", "categorical_crossentropy":
		return nn.SparseCategoricalCrossentropy{}, nil
	case "binary_crossentropy":
		return nn.BinaryCrossentropy{}, nil
	case "mse", "mean_squared_error":
		return nn.MeanSquaredError{}, nil
	case "mae", "mean_absolute_error":
		return nn.MeanAbsoluteError{}, nil
	}
	return nil, unsupportedError(fmt.Sprintf("loss %s is not supported; supported: sparse_categorical_crossentropy, categorical_crossentropy (trained as the sparse form on class labels), binary_crossentropy, mse, mae", name))
}

// StepLosses returns the file's losses as the step builder takes them
// (step.OutputLoss is nn.OutputLoss; nil
// when the file names none: the builder's default, sparse categorical
// cross-entropy on the first output).
func (t *Training) StepLosses() ([]nn.OutputLoss, error) {
	if t == nil {
		return nil, nil
	}
	var out []nn.OutputLoss
	for _, l := range t.Losses {
		switch l.Reduction {
		case "", "auto", "sum_over_batch_size":
		default:
			return nil, unsupportedError(fmt.Sprintf("loss %s with reduction %q is not supported: headroom averages the loss over the batch (sum_over_batch_size)", l.Name, l.Reduction))
		}
		nl, err := NNLoss(l.Name)
		if err != nil {
			return nil, err
		}
		out = append(out, nn.OutputLoss{Output: l.Output, Loss: nl, Weight: l.Weight})
	}
	return out, nil
}

// Optimizer is the file's optimizer as headroom runs it.
type Optimizer struct {
	Optimizer optim.Optimizer
	// Schedule is the learning rate: the file's, and Keras 2's decay as an
	// inverse time decay.
	Schedule optim.Schedule
	// ClipNorm is global_clipnorm (0: none).
	ClipNorm float64
	// Description is the optimizer and its settings ("Adam(learning_rate=
	// 0.001, beta_1=0.9, ...)").
	Description string
}

// optimizerDefaults are Keras 3's defaults by class, lower case; a setting
// the file leaves out takes them.
var optimizerDefaults = map[string]map[string]float64{
	"adam":    {"learning_rate": 0.001, "beta_1": 0.9, "beta_2": 0.999, "epsilon": 1e-7},
	"adamw":   {"learning_rate": 0.001, "beta_1": 0.9, "beta_2": 0.999, "epsilon": 1e-7, "weight_decay": 0.004},
	"sgd":     {"learning_rate": 0.01, "momentum": 0},
	"rmsprop": {"learning_rate": 0.001, "rho": 0.9, "momentum": 0, "epsilon": 1e-7},
	"adagrad": {"learning_rate": 0.001, "initial_accumulator_value": 0.1, "epsilon": 1e-7},
	"nadam":   {"learning_rate": 0.001, "beta_1": 0.9, "beta_2": 0.999, "epsilon": 1e-7},
	"adamax":  {"learning_rate": 0.001, "beta_1": 0.9, "beta_2": 0.999, "epsilon": 1e-7},
}

// ignoredSettings change nothing a training step computes, or are off.
var ignoredSettings = map[string]bool{"name": true, "is_legacy_optimizer": true, "jit_compile": true,
	"ema_momentum": true, "ema_overwrite_frequency": true, "registered_name": true, "module": true}

// NewOptimizer returns the file's optimizer with its settings, or an error
// naming what headroom cannot honour (nil, nil when the file names none).
func (t *Training) NewOptimizer() (*Optimizer, error) {
	if t == nil || t.Optimizer == "" {
		return nil, nil
	}
	class := t.Optimizer
	if i := strings.LastIndexAny(class, ">."); i >= 0 {
		class = class[i+1:]
	}
	kind := strings.ToLower(class)
	defs, ok := optimizerDefaults[kind]
	if !ok {
		return nil, unsupportedError(fmt.Sprintf("optimizer %s is not supported; supported: Adam, AdamW, SGD (momentum, nesterov), RMSprop, Adagrad, Nadam, Adamax", t.Optimizer))
	}
	conf := make(map[string]any, len(t.optimizer))
	for k, v := range t.optimizer {
		conf[k] = v
	}
	f := &fields{m: conf}
	num := func(k string) float64 { return f.float(k, defs[k]) }
	used := map[string]bool{}
	for k := range defs {
		used[k] = true
	}
	o := &Optimizer{}
	if v, ok := f.get("learning_rate"); ok {
		if sm, isSchedule := v.(map[string]any); isSchedule {
			s, err := readSchedule(sm)
			if err != nil {
				return nil, fmt.Errorf("optimizer %s: learning_rate: %w", t.Optimizer, err)
			}
			o.Schedule = s
			delete(f.m, "learning_rate")
		}
	}
	if o.Schedule == nil {
		lr := num("learning_rate")
		if !(lr > 0) {
			f.fail("learning_rate %v: want a positive number", lr)
		}
		o.Schedule = optim.Constant(lr)
		if decay := f.float("decay", 0); decay != 0 { // Keras 2: lr / (1 + decay·iterations)
			if decay < 0 {
				f.fail("decay %v is negative", decay)
			}
			o.Schedule = InverseTimeDecay{Initial: lr, Rate: decay, Steps: 1}
		}
	}
	used["decay"] = true
	if f.boolean("amsgrad", false) {
		f.unsupported("amsgrad=true is not supported: headroom's Adam keeps no maximum of v")
	}
	if f.boolean("use_ema", false) {
		f.unsupported("use_ema=true is not supported: headroom keeps no moving average of the weights")
	}
	for _, k := range []string{"clipnorm", "clipvalue", "loss_scale_factor"} {
		if f.has(k) {
			f.unsupported("%s is not supported: headroom clips by the global norm only (global_clipnorm)", k)
		}
	}
	if n := f.float("gradient_accumulation_steps", 1); n != 1 {
		f.unsupported("gradient_accumulation_steps=%v is not supported: use --accumulate, which splits each batch instead", n)
	}
	o.ClipNorm = f.float("global_clipnorm", 0)
	if o.ClipNorm < 0 {
		f.fail("global_clipnorm %v is negative", o.ClipNorm)
	}
	wd := f.float("weight_decay", defs["weight_decay"])
	for _, k := range []string{"amsgrad", "use_ema", "clipnorm", "clipvalue", "loss_scale_factor", "gradient_accumulation_steps", "global_clipnorm", "weight_decay"} {
		used[k] = true
	}
	switch kind {
	case "adam", "adamw":
		b1, b2, eps := num("beta_1"), num("beta_2"), num("epsilon")
		if !(b1 >= 0 && b1 < 1 && b2 >= 0 && b2 < 1 && eps > 0) {
			f.fail("beta_1 %v, beta_2 %v, epsilon %v: want betas in [0, 1) and a positive epsilon", b1, b2, eps)
		}
		// Keras 3 decays weights apart from the gradient in every optimizer
		a := &optim.Adam{Beta1: b1, Beta2: b2, Epsilon: eps, WeightDecay: wd, Decoupled: wd != 0, KerasEpsilon: true}
		if b1 == 0 || b2 == 0 {
			f.unsupported("beta_1 or beta_2 of 0 is not supported: headroom's Adam reads 0 as its default")
		}
		o.Optimizer = a
	case "sgd":
		mom := num("momentum")
		nesterov := f.boolean("nesterov", false)
		used["nesterov"] = true
		if !(mom >= 0 && mom < 1) {
			f.fail("momentum %v: want a number in [0, 1)", mom)
		}
		if wd != 0 {
			f.unsupported("SGD weight_decay=%v is not supported: Keras decays the weights apart from the gradient, headroom's SGD adds it to the gradient", wd)
		}
		o.Optimizer = &optim.SGD{Momentum: mom, Nesterov: nesterov && mom != 0}
	case "rmsprop":
		rho, mom, eps := num("rho"), num("momentum"), num("epsilon")
		centered := f.boolean("centered", false)
		used["centered"] = true
		if !(rho > 0 && rho < 1 && mom >= 0 && mom < 1 && eps > 0) {
			f.fail("rho %v, momentum %v, epsilon %v: want rho in (0, 1), momentum in [0, 1) and a positive epsilon", rho, mom, eps)
		}
		o.Optimizer = &optim.RMSprop{Rho: rho, Momentum: mom, Epsilon: eps, Centered: centered}
	case "adagrad":
		init, eps := num("initial_accumulator_value"), num("epsilon")
		if !(init > 0 && eps > 0) {
			f.unsupported("initial_accumulator_value %v, epsilon %v: headroom's Adagrad takes positive ones", init, eps)
		}
		o.Optimizer = &optim.Adagrad{InitialAccumulator: init, Epsilon: eps}
	case "nadam":
		b1, b2, eps := num("beta_1"), num("beta_2"), num("epsilon")
		if !(b1 > 0 && b1 < 1 && b2 > 0 && b2 < 1 && eps > 0) {
			f.fail("beta_1 %v, beta_2 %v, epsilon %v: want betas in (0, 1) and a positive epsilon", b1, b2, eps)
		}
		d := 1.0
		if f.has("schedule_decay") { // Keras 2's legacy Nadam
			if d = f.float("schedule_decay", 0.004); !(d > 0) {
				f.fail("schedule_decay %v: want a positive number", d)
			}
		}
		used["schedule_decay"] = true
		if wd != 0 {
			f.unsupported("Nadam weight_decay=%v is not supported", wd)
		}
		o.Optimizer = &optim.Nadam{Beta1: b1, Beta2: b2, Epsilon: eps, ScheduleDecay: d}
	case "adamax":
		b1, b2, eps := num("beta_1"), num("beta_2"), num("epsilon")
		if !(b1 > 0 && b1 < 1 && b2 > 0 && b2 < 1 && eps > 0) {
			f.fail("beta_1 %v, beta_2 %v, epsilon %v: want betas in (0, 1) and a positive epsilon", b1, b2, eps)
		}
		if wd != 0 {
			f.unsupported("Adamax weight_decay=%v is not supported", wd)
		}
		o.Optimizer = &optim.Adamax{Beta1: b1, Beta2: b2, Epsilon: eps}
	}
	var unknown []string
	for k, v := range conf {
		if !used[k] && !ignoredSettings[k] && v != nil {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		f.unsupported("setting %s of %s is not known to headroom", strings.Join(unknown, ", "), t.Optimizer)
	}
	if f.err != nil {
		return nil, fmt.Errorf("optimizer %s: %w", t.Optimizer, f.err)
	}
	if _, constant := o.Schedule.(optim.Constant); !constant {
		conf["learning_rate"] = scheduleText(o.Schedule.String())
	}
	o.Description = describeOptimizer(class, conf, defs)
	return o, nil
}

// scheduleText is a learning rate schedule described for describeOptimizer.
type scheduleText string

// describeOptimizer writes class(setting=value, ...) with every setting
// that applies, defaults filled in.
func describeOptimizer(class string, conf map[string]any, defs map[string]float64) string {
	var keys []string
	for k := range defs {
		keys = append(keys, k)
	}
	for k, v := range conf {
		if _, ok := defs[k]; !ok && !ignoredSettings[k] && v != nil && v != false {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		v, ok := conf[k]
		if !ok || v == nil {
			parts = append(parts, fmt.Sprintf("%s=%g", k, defs[k]))
			continue
		}
		if st, ok := v.(scheduleText); ok {
			parts = append(parts, k+"="+string(st))
			continue
		}
		parts = append(parts, k+"="+describe(v))
	}
	return class + "(" + strings.Join(parts, ", ") + ")"
}
