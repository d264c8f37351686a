package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/headroom-ml/headroom/data"
	"github.com/headroom-ml/headroom/mem"
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

// apply sets the run's callbacks, schedule, loss and clipping.
func (k *fitFlags) apply(cfg *train.Config, trainSet *data.Examples, lr float64) error {
	if k.patience < 0 {
		return fmt.Errorf("--early-stopping-patience %d: want a number of epochs >= 0", k.patience)
	}
	if k.patience > 0 {
		monitor := "val_loss"
		if cfg.Validation == nil {
			monitor = "loss"
		}
		cfg.Callbacks = append(cfg.Callbacks, &train.EarlyStopping{Monitor: monitor, Patience: k.patience})
	}
	steps := int64(cfg.Epochs) * int64((trainSet.N+cfg.Batch-1)/cfg.Batch)
	switch k.schedule {
	case "", "constant":
	case "cosine":
		cfg.Schedule = optim.Cosine{Base: lr, Steps: steps}
	case "step":
		cfg.Schedule = optim.StepDecay{Base: lr, Factor: 0.1, Every: max(1, (steps+2)/3)}
	case "warmup":
		cfg.Schedule = optim.Warmup{Steps: max(1, steps/10), Then: optim.Constant(lr)}
	default:
		return fmt.Errorf("--lr-schedule %q: want constant, cosine, step or warmup", k.schedule)
	}
	switch k.classWeight {
	case "":
	case "balanced":
		if trainSet.Labels == nil && trainSet.Pixels == nil && trainSet.Floats == nil {
			return fmt.Errorf("--class-weight balanced needs the data in memory to count its classes, not --stream")
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
		return fmt.Errorf("--class-weight %q: want balanced", k.classWeight)
	}
	if !(k.clipNorm >= 0) {
		return fmt.Errorf("--clip-norm %v: want a norm >= 0", k.clipNorm)
	}
	cfg.ClipNorm = k.clipNorm
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
			return nil, fmt.Errorf("--augment %q: want a list of flip, crop", k.augment)
		}
	}
	return a, nil
}

// stream returns the pipeline --augment trains through (nil without it),
// and adds the callback that draws each epoch's order.
func (k *fitFlags) stream(cfg *train.Config, trainSet *data.Examples, seed uint64) (*data.EpochStream, error) {
	aug, err := k.augmentation(seed)
	if aug == nil || err != nil {
		return nil, err
	}
	if trainSet.Pixels == nil && trainSet.Floats == nil {
		return nil, fmt.Errorf("--augment with data streamed from its files (--stream) is not supported: the augmentation maps examples held in memory")
	}
	s, err := data.NewEpochStream(trainSet, seed, aug)
	if err != nil {
		return nil, fmt.Errorf("--augment: %w", err)
	}
	cfg.Callbacks = append(cfg.Callbacks, epochOrder{s})
	return s, nil
}

// epochOrder draws the stream's order at each epoch's beginning.
type epochOrder struct{ s *data.EpochStream }

func (e epochOrder) OnEpochBegin(_ *train.Trainer, epoch int)             { e.s.SetEpoch(epoch) }
func (e epochOrder) OnEpochEnd(_ *train.Trainer, _ *train.EpochLog) error { return nil }

// fitData trains on the examples in memory, through the augmentation
// pipeline when there is one, or on the stream of --data under the
// pipeline budget pb (which the plan counts).
func fitData(w io.Writer, t *train.Trainer, trainSet *data.Examples, aug *data.EpochStream, d *dataFlags, batch int, pb int64) (*train.History, error) {
	if st := d.streamed; st != nil {
		shuffle := streamShuffle(batch, st.Shape.Size(), pb)
		fmt.Fprintf(w, "  input pipeline: %s read from its files each epoch (%d examples, shuffled in a buffer of %d), budget %s\n",
			d.path, st.N, shuffle, mem.FormatBytes(pb))
		return t.FitStream(context.Background(), st.Dataset(batch, shuffle), data.Config{Name: "stream", Budget: pb})
	}
	if aug == nil {
		return t.Fit(trainSet)
	}
	per := int64(trainSet.Shape.Size()*4 + 4)
	return t.FitStream(context.Background(), aug.Dataset(batch), data.Config{Name: "augment", Budget: 16*int64(batch)*per + 8<<20})
}

// streamShuffle is the shuffle buffer of a streamed run: 64 batches, at
// least 1024 examples, but at most a quarter of the pipeline's budget
// (an example of d features takes its float32 block and its label's, each
// at least 64 bytes).
func streamShuffle(batch, d int, budget int64) int {
	per := max(64, int64(d*4+63)&^63) + 64
	return int(max(1, min(int64(max(1024, 64*batch)), budget/4/per)))
}
