package keras

import (
	"errors"
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/optim"
)

// withTraining returns a one-layer Sequential config carrying the given
// training config JSON under key (training_config or compile_config).
func withTraining(key, conf string) string {
	s := seq(input28, flat28, dense10)
	return s[:len(s)-1] + `, "` + key + `": ` + conf + `}`
}

func TestOptimizers(t *testing.T) {
	tests := []struct {
		name  string
		key   string
		conf  string
		want  optim.Optimizer
		lr    float64 // at step 1
		lr100 float64 // at step 101
		clip  float64
	}{
		{"keras 3 adam", "compile_config", `{"optimizer": {"module": "keras.optimizers", "class_name": "Adam", "config": {"name": "adam", "learning_rate": 0.002,
			"weight_decay": null, "clipnorm": null, "global_clipnorm": null, "clipvalue": null, "use_ema": false, "ema_momentum": 0.99, "beta_1": 0.8, "beta_2": 0.99,
			"epsilon": 1e-06, "amsgrad": false}}, "loss": "mse"}`,
			&optim.Adam{Beta1: 0.8, Beta2: 0.99, Epsilon: 1e-6, KerasEpsilon: true}, 0.002, 0.002, 0},
		{"adam by name", "compile_config", `{"optimizer": "adam", "loss": "mse"}`,
			&optim.Adam{Beta1: 0.9, Beta2: 0.999, Epsilon: 1e-7, KerasEpsilon: true}, 0.001, 0.001, 0},
		{"keras 3 adam weight decay", "compile_config", `{"optimizer": {"class_name": "Adam", "config": {"learning_rate": 0.01, "weight_decay": 0.1}}}`,
			&optim.Adam{Beta1: 0.9, Beta2: 0.999, Epsilon: 1e-7, WeightDecay: 0.1, Decoupled: true, KerasEpsilon: true}, 0.01, 0.01, 0},
		{"adamw default decay", "compile_config", `{"optimizer": {"class_name": "AdamW", "config": {"learning_rate": 0.01}}}`,
			&optim.Adam{Beta1: 0.9, Beta2: 0.999, Epsilon: 1e-7, WeightDecay: 0.004, Decoupled: true, KerasEpsilon: true}, 0.01, 0.01, 0},
		{"keras 2 adam with decay", "training_config", `{"optimizer_config": {"class_name": "Adam", "config": {"lr": 0.1, "beta_1": 0.9, "beta_2": 0.999, "decay": 0.01, "epsilon": 1e-07, "amsgrad": false}}, "loss": "categorical_crossentropy"}`,
			&optim.Adam{Beta1: 0.9, Beta2: 0.999, Epsilon: 1e-7, KerasEpsilon: true}, 0.1, 0.1 / (1 + 0.01*100), 0},
		{"sgd nesterov, global clip", "compile_config", `{"optimizer": {"class_name": "SGD", "config": {"learning_rate": 0.05, "momentum": 0.9, "nesterov": true, "global_clipnorm": 2.5}}}`,
			&optim.SGD{Momentum: 0.9, Nesterov: true}, 0.05, 0.05, 2.5},
		{"tensorflow 2.11 custom prefix", "training_config", `{"optimizer_config": {"class_name": "Custom>SGD", "config": {"learning_rate": 0.5, "momentum": 0.0, "nesterov": false, "is_legacy_optimizer": false, "jit_compile": true}}}`,
			&optim.SGD{}, 0.5, 0.5, 0},
		{"tfjs camel case", "trainingConfig", `{"optimizer_config": {"class_name": "RMSProp", "config": {"learningRate": 0.003, "rho": 0.95, "momentum": 0.5, "epsilon": 1e-05, "centered": true}}, "loss": "meanSquaredError"}`,
			&optim.RMSprop{Rho: 0.95, Momentum: 0.5, Epsilon: 1e-5, Centered: true}, 0.003, 0.003, 0},
		{"adagrad", "compile_config", `{"optimizer": {"class_name": "Adagrad", "config": {"learning_rate": 0.1, "initial_accumulator_value": 0.5, "epsilon": 1e-7}}}`,
			&optim.Adagrad{InitialAccumulator: 0.5, Epsilon: 1e-7}, 0.1, 0.1, 0},
		{"keras 2 nadam", "training_config", `{"optimizer_config": {"class_name": "Nadam", "config": {"lr": 0.002, "beta_1": 0.9, "beta_2": 0.999, "epsilon": 1e-07, "schedule_decay": 0.004}}}`,
			&optim.Nadam{Beta1: 0.9, Beta2: 0.999, Epsilon: 1e-7, ScheduleDecay: 0.004}, 0.002, 0.002, 0},
		{"exponential decay", "compile_config", `{"optimizer": {"class_name": "Adam", "config": {"learning_rate": {"module": "keras.optimizers.schedules", "class_name": "ExponentialDecay",
			"config": {"initial_learning_rate": 0.1, "decay_steps": 50, "decay_rate": 0.5, "staircase": false}}}}}`,
			&optim.Adam{Beta1: 0.9, Beta2: 0.999, Epsilon: 1e-7, KerasEpsilon: true}, 0.1, 0.025, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			js := withTraining(tc.key, tc.conf)
			if tc.key == "trainingConfig" {
				js = `{"modelTopology": ` + seq(input28, flat28, dense10) + `, "trainingConfig": ` + tc.conf + `}`
			}
			m, err := Parse([]byte(js), "o.json")
			if err != nil {
				t.Fatal(err)
			}
			o, err := m.Training.NewOptimizer()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(o.Optimizer, tc.want) {
				t.Errorf("optimizer: got %#v, want %#v", o.Optimizer, tc.want)
			}
			if got := o.Schedule.LR(1); math.Abs(got-tc.lr) > 1e-12 {
				t.Errorf("learning rate at step 1: got %v, want %v", got, tc.lr)
			}
			if got := o.Schedule.LR(101); math.Abs(got-tc.lr100) > 1e-12 {
				t.Errorf("learning rate at step 101: got %v, want %v", got, tc.lr100)
			}
			if o.ClipNorm != tc.clip {
				t.Errorf("clip: got %v, want %v", o.ClipNorm, tc.clip)
			}
			if o.Description == "" || !strings.Contains(o.Description, "(") {
				t.Errorf("description %q", o.Description)
			}
		})
	}
}

func TestOptimizerRefusals(t *testing.T) {
	tests := []struct{ name, conf, contains string }{
		{"unknown class", `{"class_name": "Ftrl", "config": {}}`, "optimizer Ftrl is not supported"},
		{"amsgrad", `{"class_name": "Adam", "config": {"amsgrad": true}}`, "amsgrad=true"},
		{"clipnorm", `{"class_name": "Adam", "config": {"clipnorm": 1.0}}`, "clipnorm is not supported"},
		{"clipvalue", `{"class_name": "SGD", "config": {"clipvalue": 0.5}}`, "clipvalue is not supported"},
		{"ema", `{"class_name": "SGD", "config": {"use_ema": true}}`, "use_ema=true"},
		{"accumulation", `{"class_name": "SGD", "config": {"gradient_accumulation_steps": 4}}`, "gradient_accumulation_steps=4"},
		{"sgd weight decay", `{"class_name": "SGD", "config": {"weight_decay": 0.01}}`, "SGD weight_decay=0.01"},
		{"unknown setting", `{"class_name": "Adam", "config": {"lookahead": 5}}`, "setting lookahead of Adam is not known"},
		{"negative rate", `{"class_name": "Adam", "config": {"learning_rate": -1}}`, "learning_rate -1"},
		{"unknown schedule", `{"class_name": "Adam", "config": {"learning_rate": {"class_name": "CosineDecayRestarts", "config": {}}}}`,
			"schedule CosineDecayRestarts is not supported"},
		{"cosine warm-up", `{"class_name": "Adam", "config": {"learning_rate": {"class_name": "CosineDecay", "config": {"initial_learning_rate": 0.1, "decay_steps": 10, "warmup_target": 0.2, "warmup_steps": 5}}}}`,
			"with a warm-up"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Parse([]byte(withTraining("compile_config", `{"optimizer": `+tc.conf+`}`)), "o.json")
			if err != nil {
				t.Fatal(err)
			}
			o, err := m.Training.NewOptimizer()
			if err == nil {
				t.Fatalf("got %s, want an error containing %q", o.Description, tc.contains)
			}
			if !strings.Contains(err.Error(), tc.contains) || !strings.HasPrefix(err.Error(), "optimizer ") {
				t.Errorf("got %q, want it to name the optimizer and contain %q", err, tc.contains)
			}
			if tc.name != "negative rate" && !errors.Is(err, ErrUnsupported) {
				t.Errorf("errors.Is(err, ErrUnsupported) is false for %q", err)
			}
		})
	}
}

func TestSchedules(t *testing.T) {
	tests := []struct {
		s    optim.Schedule
		want map[int64]float64 // step (from 1) -> rate
	}{
		{ExponentialDecay{Initial: 1, Steps: 10, Rate: 0.5}, map[int64]float64{1: 1, 11: 0.5, 6: math.Pow(0.5, 0.5)}},
		{ExponentialDecay{Initial: 1, Steps: 10, Rate: 0.5, Staircase: true}, map[int64]float64{6: 1, 11: 0.5, 25: 0.25}},
		{InverseTimeDecay{Initial: 1, Steps: 1, Rate: 0.5}, map[int64]float64{1: 1, 2: 1 / 1.5, 5: 1.0 / 3}},
		{CosineDecay{Initial: 2, Steps: 10, Alpha: 0.1}, map[int64]float64{1: 2, 6: 2 * (0.9*0.5 + 0.1), 11: 0.2, 50: 0.2}},
		{PolynomialDecay{Initial: 1, Steps: 4, End: 0.2, Power: 2}, map[int64]float64{1: 1, 3: 0.8*0.25 + 0.2, 9: 0.2}},
		{PiecewiseConstantDecay{Boundaries: []float64{2, 5}, Values: []float64{1, 0.5, 0.1}}, map[int64]float64{1: 1, 3: 1, 4: 0.5, 6: 0.5, 7: 0.1}},
	}
	for _, tc := range tests {
		for step, want := range tc.want {
			if got := tc.s.LR(step); math.Abs(got-want) > 1e-12 {
				t.Errorf("%s at step %d: got %v, want %v", tc.s, step, got, want)
			}
		}
	}
}

func TestLosses(t *testing.T) {
	two := func(conf string) string {
		// two outputs: "a" (10 classes) and "b" (1 value)
		return `{"class_name": "Model", "config": {"name": "m", "layers": [
			{"name": "in", "class_name": "InputLayer", "config": {"name": "in", "batch_input_shape": [null, 4]}, "inbound_nodes": []},
			{"name": "a", "class_name": "Dense", "config": {"name": "a", "units": 10}, "inbound_nodes": [[["in", 0, 0, {}]]]},
			{"name": "b", "class_name": "Dense", "config": {"name": "b", "units": 1}, "inbound_nodes": [[["in", 0, 0, {}]]]}],
			"input_layers": [["in", 0, 0]], "output_layers": [["a", 0, 0], ["b", 0, 0]]}, "training_config": ` + conf + `}`
	}
	tests := []struct {
		name string
		json string
		want []OutputLoss
	}{
		{"keras 3 function", withTraining("compile_config", `{"loss": {"module": "keras.losses", "class_name": "function", "config": "sparse_categorical_crossentropy", "registered_name": "sparse_categorical_crossentropy"}}`),
			[]OutputLoss{{Output: 0, Name: "sparse_categorical_crossentropy", Weight: 1}}},
		{"keras 3 object", withTraining("compile_config", `{"loss": {"module": "keras.losses", "class_name": "MeanSquaredError", "config": {"name": "mean_squared_error", "reduction": "sum_over_batch_size"}}}`),
			[]OutputLoss{{Output: 0, Name: "mse", Weight: 1, Reduction: "sum_over_batch_size"}}},
		{"module path", withTraining("training_config", `{"loss": "keras.losses.binary_crossentropy"}`),
			[]OutputLoss{{Output: 0, Name: "binary_crossentropy", Weight: 1}}},
		{"one loss, two outputs", two(`{"loss": "mse"}`), []OutputLoss{{0, "mse", 1, ""}, {1, "mse", 1, ""}}},
		{"list and weights", two(`{"loss": ["categorical_crossentropy", "mse"], "loss_weights": [1.0, 0.5]}`),
			[]OutputLoss{{0, "categorical_crossentropy", 1, ""}, {1, "mse", 0.5, ""}}},
		{"dict and weights", two(`{"loss": {"b": "binary_crossentropy"}, "loss_weights": {"b": 2, "a": 0.1}}`),
			[]OutputLoss{{1, "binary_crossentropy", 2, ""}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Parse([]byte(tc.json), "l.json")
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(m.Training.Losses, tc.want) {
				t.Errorf("losses: got %+v, want %+v", m.Training.Losses, tc.want)
			}
			if m.Loss != tc.want[0].Name {
				t.Errorf("Loss: got %q, want %q", m.Loss, tc.want[0].Name)
			}
			ls, err := m.Training.StepLosses()
			if err != nil || len(ls) != len(tc.want) {
				t.Fatalf("step losses: got %v (%v), want %d", ls, err, len(tc.want))
			}
			for i, l := range ls {
				want, _ := NNLoss(tc.want[i].Name)
				if l.Output != tc.want[i].Output || l.Weight != tc.want[i].Weight || l.Loss != want {
					t.Errorf("step loss %d: got %+v, want output %d weight %v %s", i, l, tc.want[i].Output, tc.want[i].Weight, want.Name())
				}
			}
		})
	}
	for _, bad := range []struct{ name, json, contains string }{
		{"unknown output", two(`{"loss": {"c": "mse"}}`), `"c" is not an output`},
		{"too many", two(`{"loss": ["mse", "mse", "mse"]}`), "3 losses for 2 outputs"},
		{"bad weights", two(`{"loss": "mse", "loss_weights": [1]}`), "1 weights for 2 outputs"},
	} {
		if _, err := Parse([]byte(bad.json), "l.json"); err == nil || !strings.Contains(err.Error(), bad.contains) {
			t.Errorf("%s: got %v, want an error containing %q", bad.name, err, bad.contains)
		}
	}
	for _, bad := range []struct{ json, contains string }{
		{withTraining("compile_config", `{"loss": "huber"}`), "loss huber is not supported"},
		{withTraining("compile_config", `{"loss": {"class_name": "MeanSquaredError", "config": {"reduction": "sum"}}}`), `reduction "sum"`},
	} {
		m, err := Parse([]byte(bad.json), "l.json")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Training.StepLosses(); err == nil || !strings.Contains(err.Error(), bad.contains) || !errors.Is(err, ErrUnsupported) {
			t.Errorf("got %v, want an unsupported error containing %q", err, bad.contains)
		}
	}
	if l, _ := NNLoss("categorical_crossentropy"); l != (nn.SparseCategoricalCrossentropy{}) {
		t.Errorf("categorical_crossentropy: got %v, want the sparse form (labels are class indices)", l)
	}
}

// The two-towers testdata: a loss dict by output name with loss_weights.
func TestTwoTowersTraining(t *testing.T) {
	m, err := Load(filepath.Join("testdata", "k3_two_towers.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := []OutputLoss{{0, "sparse_categorical_crossentropy", 1, ""}, {1, "mse", 0.25, "sum_over_batch_size"}}
	if !reflect.DeepEqual(m.Training.Losses, want) {
		t.Errorf("losses: got %+v, want %+v", m.Training.Losses, want)
	}
	o, err := m.Training.NewOptimizer()
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := o.Optimizer.(*optim.SGD); !ok || *s != (optim.SGD{Momentum: 0.9, Nesterov: true}) || o.ClipNorm != 1 {
		t.Errorf("optimizer: got %#v clip %v, want SGD momentum 0.9 nesterov, clip 1", o.Optimizer, o.ClipNorm)
	}
}
