package cli

import (
	"flag"
	"fmt"
	"strings"

	"github.com/headroom-ml/headroom/data"
	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/optim"
	"github.com/headroom-ml/headroom/train"
)

// fitFlags are Keras habits as train flags: callbacks and fit arguments.
type fitFlags struct {
	patience    int
	schedule    string
	classWeight string
	clipNorm    float64
	augment     string
}

func (k *fitFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&k.patience, "early-stopping-patience", 0, "stop when val_loss (loss without validation data) has not improved for this many epochs (Keras' EarlyStopping)")
	fs.StringVar(&k.schedule, "lr-schedule", "constant", "learning rate schedule over the run: constant, cosine (to 0), step (÷10 after each third) or warmup (linear from 0 over the first tenth, then constant)")
	fs.StringVar(&k.classWeight, "class-weight", "", "balanced: weight each example's loss by n/(classes·count(class)) (Keras' class_weight, scikit-learn's \"balanced\")")
	fs.Float64Var(&k.clipNorm, "clip-norm", 0, "clip the gradients to this global norm (Keras' global_clipnorm)")
	fs.StringVar(&k.augment, "augment", "", "image augmentation as pipeline maps, a list of: flip (horizontal, half the images), crop (pad by 1/8 of each side, crop back at random)")
}

// apply sets the run's callbacks, schedule, loss, clipping and
// augmentation for data d (described by info).
func (k *fitFlags) apply(cfg *train.Config, d *train.Data, info data.SetInfo, lr float64) error {
	if k.patience < 0 {
		return usagef("--early-stopping-patience %d: want a number of epochs >= 0", k.patience)
	}
	if k.patience > 0 {
		monitor := "val_loss"
		if info.HeldOut == 0 {
			monitor = "loss"
		}
		cfg.Callbacks = append(cfg.Callbacks, &train.EarlyStopping{Monitor: monitor, Patience: k.patience})
	}
	if err := k.schedules(cfg, int64(cfg.Epochs)*int64(d.StepsPerEpoch(cfg.Batch)), lr); err != nil {
		return err
	}
	if err := k.weights(cfg, d); err != nil {
		return err
	}
	if !(k.clipNorm >= 0) {
		return usagef("--clip-norm %v: want a norm >= 0", k.clipNorm)
	}
	if k.clipNorm > 0 {
		cfg.ClipNorm = k.clipNorm
	}
	aug, err := k.augmentation(cfg.Seed)
	if aug != nil {
		d.Augment(aug)
	}
	return err
}

// schedules sets the learning rate schedule over a run of steps.
func (k *fitFlags) schedules(cfg *train.Config, steps int64, lr float64) error {
	switch k.schedule {
	case "", "constant":
	case "cosine":
		cfg.Schedule = optim.Cosine{Base: lr, Steps: steps}
	case "step":
		cfg.Schedule = optim.StepDecay{Base: lr, Factor: 0.1, Every: max(1, (steps+2)/3)}
	case "warmup":
		cfg.Schedule = optim.Warmup{Steps: max(1, steps/10), Then: optim.Constant(lr)}
	default:
		return usagef("--lr-schedule %q: want constant, cosine, step or warmup", k.schedule)
	}
	return nil
}

// weights sets the class weights of --class-weight.
func (k *fitFlags) weights(cfg *train.Config, d *train.Data) error {
	switch k.classWeight {
	case "":
	case "balanced":
		trainSet, err := d.Examples()
		if err != nil {
			return fmt.Errorf("--class-weight balanced needs the data in memory to count its classes, not --stream (%w)", err)
		}
		if trainSet.Labels == nil || trainSet.Classes < 2 {
			return fmt.Errorf("--class-weight balanced needs class labels; data set %s has none", trainSet.Name)
		}
		base := cfg.Loss
		if base == nil {
			base = nn.SparseCategoricalCrossentropy{}
		}
		if _, ok := base.(nn.SparseCategoricalCrossentropy); !ok {
			return fmt.Errorf("--class-weight needs the sparse categorical cross-entropy loss, not %s", base.Name())
		}
		cfg.Loss = nn.ClassWeighted{Loss: base, Weights: nn.BalancedClassWeights(trainSet.Labels, trainSet.Classes)}
	default:
		return usagef("--class-weight %q: want balanced", k.classWeight)
	}
	return nil
}

// augmentation returns the augmentation --augment asks for.
func (k *fitFlags) augmentation(seed uint64) (*data.Augmentation, error) {
	if k.augment == "" {
		return nil, nil
	}
	a := &data.Augmentation{Seed: seed}
	for _, p := range strings.Split(k.augment, ",") {
		switch strings.TrimSpace(p) {
		case "flip":
			a.Flip = true
		case "crop":
			a.Crop = true
		default:
			return nil, usagef("--augment %q: want a list of flip, crop", k.augment)
		}
	}
	return a, nil
}
