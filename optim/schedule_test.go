package optim_test

import (
	"math"
	"strings"
	"testing"

	"github.com/headroom-ml/headroom/optim"
)

func closeLR(got, want float64) bool {
	return math.Abs(got-want) <= 1e-15+1e-12*math.Abs(want)
}

func TestSchedules(t *testing.T) {
	cos := optim.Cosine{Base: 0.1, Min: 0.001, Steps: 100}
	tests := []struct {
		name  string
		s     optim.Schedule
		steps []int64
		want  []float64
	}{
		{"constant", optim.Constant(3e-4), []int64{1, 2, 1000, 1 << 40}, []float64{3e-4, 3e-4, 3e-4, 3e-4}},
		// ×0.5 every 10 steps: steps 1..10 at base, 11..20 at half, ...
		{"step_decay", optim.StepDecay{Base: 0.1, Factor: 0.5, Every: 10},
			[]int64{1, 10, 11, 20, 21, 31, 101},
			[]float64{0.1, 0.1, 0.05, 0.05, 0.025, 0.0125, 0.1 * math.Pow(0.5, 10)}},
		{"step_decay/every_1", optim.StepDecay{Base: 1, Factor: 0.1, Every: 1},
			[]int64{1, 2, 3}, []float64{1, 0.1, 0.01}},
		{"step_decay/never", optim.StepDecay{Base: 0.2, Factor: 0.5, Every: 0},
			[]int64{1, 100}, []float64{0.2, 0.2}},
		// Cosine: Base at step 1, the mean of Base and Min half way (step
		// 1 + Steps/2), Min after Steps steps and from then on.
		{"cosine/endpoints_and_midpoint", cos,
			[]int64{1, 51, 101, 102, 1000},
			[]float64{0.1, (0.1 + 0.001) / 2, 0.001, 0.001, 0.001}},
		{"cosine/quarters", cos,
			[]int64{26, 76},
			[]float64{0.001 + 0.099*0.5*(1+math.Sqrt2/2), 0.001 + 0.099*0.5*(1-math.Sqrt2/2)}},
		{"cosine/no_steps", optim.Cosine{Base: 1, Min: 0.5}, []int64{1, 5}, []float64{0.5, 0.5}},
		// Warmup: Then's rate × step/Steps for step < Steps, then Then.
		{"warmup/constant", optim.Warmup{Steps: 10, Then: optim.Constant(0.1)},
			[]int64{1, 2, 5, 9, 10, 11, 500},
			[]float64{0.01, 0.02, 0.05, 0.09, 0.1, 0.1, 0.1}},
		{"warmup/step_decay", optim.Warmup{Steps: 4, Then: optim.StepDecay{Base: 1, Factor: 0.5, Every: 3}},
			[]int64{1, 2, 3, 4, 5, 7},
			[]float64{0.25, 0.5, 0.75, 0.5, 0.5, 0.25}},
		{"warmup/zero_steps", optim.Warmup{Steps: 0, Then: optim.Constant(0.3)}, []int64{1, 2}, []float64{0.3, 0.3}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for i, step := range tc.steps {
				if got := tc.s.LR(step); !closeLR(got, tc.want[i]) {
					t.Errorf("%v.LR(%d) = %v, want %v", tc.s, step, got, tc.want[i])
				}
			}
		})
	}
}

// The cosine schedule is SGDR's η = Min + ½(Base − Min)(1 + cos(π·T/Steps))
// with T = step − 1 (Keras' CosineDecay and torch's CosineAnnealingLR at the
// 0-based step), clamped at T = Steps: at every step, not only the ones above.
func TestCosineFollowsSGDR(t *testing.T) {
	for _, c := range []optim.Cosine{{Base: 0.1, Min: 0.001, Steps: 100}, {Base: 1, Min: 0, Steps: 7}} {
		for step := int64(1); step <= c.Steps+3; step++ {
			T := math.Min(float64(step-1), float64(c.Steps))
			want := c.Min + 0.5*(c.Base-c.Min)*(1+math.Cos(math.Pi*T/float64(c.Steps)))
			if got := c.LR(step); !closeLR(got, want) {
				t.Errorf("%v.LR(%d) = %v, want %v", c, step, got, want)
			}
		}
	}
}

// Cosine and Warmup over a decaying schedule never increase after the ramp.
func TestSchedulesMonotone(t *testing.T) {
	for _, s := range []optim.Schedule{
		optim.Cosine{Base: 0.1, Min: 0.001, Steps: 50},
		optim.StepDecay{Base: 0.1, Factor: 0.7, Every: 5},
		optim.Warmup{Steps: 10, Then: optim.Cosine{Base: 0.1, Min: 0, Steps: 60}},
	} {
		prev := math.Inf(1)
		for step := int64(1); step <= 80; step++ {
			lr := s.LR(step)
			if lr < 0 || math.IsNaN(lr) {
				t.Fatalf("%v.LR(%d) = %v", s, step, lr)
			}
			if w, ok := s.(optim.Warmup); ok && step <= w.Steps {
				continue // ramping up
			}
			if lr > prev {
				t.Errorf("%v.LR(%d) = %v > LR(%d) = %v", s, step, lr, step-1, prev)
			}
			prev = lr
		}
	}
}

func TestScheduleStrings(t *testing.T) {
	tests := []struct {
		s    optim.Schedule
		want []string
	}{
		{optim.Constant(0.001), []string{"constant", "0.001"}},
		{optim.StepDecay{Base: 0.1, Factor: 0.5, Every: 10}, []string{"0.1", "0.5", "10"}},
		{optim.Cosine{Base: 0.1, Min: 0.001, Steps: 100}, []string{"cosine", "0.1", "0.001", "100"}},
		{optim.Warmup{Steps: 5, Then: optim.Constant(0.2)}, []string{"warmup", "5", "constant(0.2)"}},
	}
	for _, tc := range tests {
		s := tc.s.String()
		for _, w := range tc.want {
			if !strings.Contains(s, w) {
				t.Errorf("String() = %q, want it to contain %q", s, w)
			}
		}
	}
}
