package optim

import (
	"fmt"
	"math"
)

// Schedule gives the learning rate at a step (counted from 1).
type Schedule interface {
	LR(step int64) float64
	String() string
}

// Constant is a fixed learning rate.
type Constant float64

func (c Constant) LR(int64) float64 { return float64(c) }
func (c Constant) String() string   { return fmt.Sprintf("constant(%g)", float64(c)) }

// StepDecay multiplies Base by Factor every Every steps.
type StepDecay struct {
	Base   float64
	Factor float64
	Every  int64
}

func (s StepDecay) LR(step int64) float64 {
	if s.Every <= 0 {
		return s.Base
	}
	return s.Base * math.Pow(s.Factor, float64((step-1)/s.Every))
}
func (s StepDecay) String() string {
	return fmt.Sprintf("step_decay(%g, x%g every %d)", s.Base, s.Factor, s.Every)
}

// Cosine decays from Base to Min over Steps steps along a half cosine
// (Loshchilov and Hutter, SGDR, 2017, without restarts), then stays at Min.
type Cosine struct {
	Base, Min float64
	Steps     int64
}

func (c Cosine) LR(step int64) float64 {
	if c.Steps <= 0 || step > c.Steps {
		return c.Min
	}
	t := float64(step-1) / float64(c.Steps)
	return c.Min + (c.Base-c.Min)*0.5*(1+math.Cos(math.Pi*t))
}
func (c Cosine) String() string {
	return fmt.Sprintf("cosine(%g -> %g over %d)", c.Base, c.Min, c.Steps)
}

// Warmup ramps linearly from 0 to Then's rate over Steps steps, then
// follows Then.
type Warmup struct {
	Steps int64
	Then  Schedule
}

func (w Warmup) LR(step int64) float64 {
	if step < w.Steps {
		return w.Then.LR(step) * float64(step) / float64(w.Steps)
	}
	return w.Then.LR(step)
}
func (w Warmup) String() string { return fmt.Sprintf("warmup(%d, %v)", w.Steps, w.Then) }
