package keras

import (
	"fmt"
	"math"
	"strings"

	"github.com/headroom-ml/headroom/optim"
)

// Keras' learning rate schedules (keras.optimizers.schedules), as
// optim.Schedules. Keras counts the step from 0 (the updates done before
// this one), optim from 1: each schedule reads step-1.

// readSchedule reads a serialized schedule ({"class_name":
// "ExponentialDecay", "config": {...}}).
func readSchedule(m map[string]any) (optim.Schedule, error) {
	class, _ := m["class_name"].(string)
	conf, ok := m["config"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("schedule %s: config: want an object, got %s", class, describe(m["config"]))
	}
	f := &fields{m: conf}
	positive := func(k string) float64 {
		x := f.float(k, 0)
		if !(x > 0) {
			f.fail("%s %v: want a positive number", k, x)
		}
		return x
	}
	var s optim.Schedule
	switch strings.TrimPrefix(class, "Custom>") {
	case "ExponentialDecay":
		s = ExponentialDecay{Initial: positive("initial_learning_rate"), Steps: positive("decay_steps"),
			Rate: positive("decay_rate"), Staircase: f.boolean("staircase", false)}
	case "InverseTimeDecay":
		s = InverseTimeDecay{Initial: positive("initial_learning_rate"), Steps: positive("decay_steps"),
			Rate: f.float("decay_rate", 0), Staircase: f.boolean("staircase", false)}
	case "CosineDecay":
		if f.has("warmup_target") || f.float("warmup_steps", 0) != 0 {
			f.unsupported("CosineDecay with a warm-up is not supported")
		}
		s = CosineDecay{Initial: positive("initial_learning_rate"), Steps: positive("decay_steps"), Alpha: f.float("alpha", 0)}
	case "PolynomialDecay":
		if f.boolean("cycle", false) {
			f.unsupported("PolynomialDecay with cycle=true is not supported")
		}
		s = PolynomialDecay{Initial: positive("initial_learning_rate"), Steps: positive("decay_steps"),
			End: f.float("end_learning_rate", 0.0001), Power: f.float("power", 1)}
	case "PiecewiseConstantDecay":
		b, v := f.list("boundaries"), f.list("values")
		if f.err == nil && len(v) != len(b)+1 {
			f.fail("%d values for %d boundaries: want one more value", len(v), len(b))
		}
		s = PiecewiseConstantDecay{Boundaries: b, Values: v}
	default:
		return nil, unsupportedError(fmt.Sprintf("learning rate schedule %s is not supported; supported: ExponentialDecay, InverseTimeDecay, CosineDecay, PolynomialDecay, PiecewiseConstantDecay", class))
	}
	if f.err != nil {
		return nil, fmt.Errorf("schedule %s: %w", class, f.err)
	}
	return s, nil
}

// list reads a list of numbers.
func (f *fields) list(key string) []float64 {
	v, ok := f.get(key)
	l, isList := v.([]any)
	if !ok || !isList {
		f.fail("%s: want a list of numbers, got %s", key, describe(v))
		return nil
	}
	out := make([]float64, len(l))
	for i, e := range l {
		g := &fields{m: map[string]any{"x": e}}
		out[i] = g.float("x", 0)
		if g.err != nil {
			f.fail("%s[%d]: %v", key, i, g.err)
			return nil
		}
	}
	return out
}

// kerasStep is the step as Keras' schedules count it (from 0).
func kerasStep(step int64) float64 { return float64(max(step-1, 0)) }

// ExponentialDecay is Initial·Rate^(s/Steps) (s/Steps floored with
// Staircase).
type ExponentialDecay struct {
	Initial, Steps, Rate float64
	Staircase            bool
}

func (s ExponentialDecay) LR(step int64) float64 {
	p := kerasStep(step) / s.Steps
	if s.Staircase {
		p = math.Floor(p)
	}
	return s.Initial * math.Pow(s.Rate, p)
}

func (s ExponentialDecay) String() string {
	return fmt.Sprintf("exponential_decay(%g, x%g every %g steps, staircase %v)", s.Initial, s.Rate, s.Steps, s.Staircase)
}

// InverseTimeDecay is Initial/(1 + Rate·s/Steps); Keras 2's optimizer
// "decay" is the one with Steps 1.
type InverseTimeDecay struct {
	Initial, Steps, Rate float64
	Staircase            bool
}

func (s InverseTimeDecay) LR(step int64) float64 {
	p := kerasStep(step) / s.Steps
	if s.Staircase {
		p = math.Floor(p)
	}
	return s.Initial / (1 + s.Rate*p)
}

func (s InverseTimeDecay) String() string {
	return fmt.Sprintf("inverse_time_decay(%g, rate %g every %g steps)", s.Initial, s.Rate, s.Steps)
}

// CosineDecay is Initial·((1-Alpha)·½(1 + cos(π·min(s, Steps)/Steps)) + Alpha).
type CosineDecay struct {
	Initial, Steps, Alpha float64
}

func (s CosineDecay) LR(step int64) float64 {
	p := math.Min(kerasStep(step), s.Steps) / s.Steps
	return s.Initial * ((1-s.Alpha)*0.5*(1+math.Cos(math.Pi*p)) + s.Alpha)
}

func (s CosineDecay) String() string {
	return fmt.Sprintf("cosine_decay(%g over %g steps, alpha %g)", s.Initial, s.Steps, s.Alpha)
}

// PolynomialDecay is (Initial - End)·(1 - min(s, Steps)/Steps)^Power + End.
type PolynomialDecay struct {
	Initial, Steps, End, Power float64
}

func (s PolynomialDecay) LR(step int64) float64 {
	p := math.Min(kerasStep(step), s.Steps) / s.Steps
	return (s.Initial-s.End)*math.Pow(1-p, s.Power) + s.End
}

func (s PolynomialDecay) String() string {
	return fmt.Sprintf("polynomial_decay(%g to %g over %g steps, power %g)", s.Initial, s.End, s.Steps, s.Power)
}

// PiecewiseConstantDecay is Values[0] up to Boundaries[0] (included),
// Values[1] up to Boundaries[1], ..., the last value after the last
// boundary.
type PiecewiseConstantDecay struct {
	Boundaries, Values []float64
}

func (s PiecewiseConstantDecay) LR(step int64) float64 {
	x := kerasStep(step)
	for i, b := range s.Boundaries {
		if x <= b {
			return s.Values[i]
		}
	}
	return s.Values[len(s.Values)-1]
}

func (s PiecewiseConstantDecay) String() string {
	return fmt.Sprintf("piecewise_constant(%v at %v)", s.Values, s.Boundaries)
}

var (
	_ optim.Schedule = ExponentialDecay{}
	_ optim.Schedule = InverseTimeDecay{}
	_ optim.Schedule = CosineDecay{}
	_ optim.Schedule = PolynomialDecay{}
	_ optim.Schedule = PiecewiseConstantDecay{}
)
