package cli

import (
	"errors"
	"fmt"
	"io"

	"github.com/headroom-ml/headroom/data"
	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/nn/keras"
	"github.com/headroom-ml/headroom/tensor"
	"github.com/headroom-ml/headroom/train"
)

// kerasFile is what --keras gives a run: the model read from the file,
// and the optimizer it asks for (described for the run's output).
type kerasFile struct {
	m         *keras.Model
	optimizer string // "" when the file names none or flags override it
	planNote  string // plan only: the file's loss or optimizer the plan does without, and why
}

// loadKeras reads --keras once.
func (o *options) loadKeras() (*keras.Model, error) {
	if o.kf == nil {
		opts := o.inputShapes
		if o.set["seq"] {
			opts = append(opts, keras.WithSeq(o.seq))
		}
		m, err := loadKerasFile(o.keras, o.kerasConfig, opts...)
		if err != nil {
			return nil, err
		}
		o.kf = &kerasFile{m: m}
	}
	return o.kf.m, nil
}

// kerasModel reads --keras and checks it against the data (info.Train nil
// when planning without data): the model must have one input holding one
// example (reshaped as the model expects), and its first output one value
// per class.
func (o *options) kerasModel(info data.SetInfo) (nn.Model, error) {
	km, err := o.loadKeras()
	if err != nil {
		return nil, err
	}
	m := km.NN()
	d := info.Train
	if d == nil {
		return m, nil
	}
	ins := m.Inputs()
	if len(ins) != 1 {
		return nil, fmt.Errorf("%s has %d inputs: training feeds one (headroom plan --keras plans it)", o.keras, len(ins))
	}
	if ins[0].Shape.Size() != d.Shape.Size() {
		return nil, fmt.Errorf("%s expects examples of shape %v; data set %s has %v", o.keras, ins[0].Shape, o.dataset, d.Shape)
	}
	binary := km.Loss == "binary_crossentropy" && d.Classes == 2 // one sigmoid output for two classes
	if out := outputShape(km, 0); d.Classes > 0 && out.Size() != d.Classes && !(binary && out.Size() == 1) {
		return nil, fmt.Errorf("%s ends in %v outputs; data set %s has %d classes", o.keras, out, o.dataset, d.Classes)
	}
	return m, nil
}

// outputShape returns the shape (per example) of output i of km.
func outputShape(km *keras.Model, i int) tensor.Shape {
	name := km.OutputNames[i]
	for _, l := range km.Layers {
		if l.Name == name {
			return l.Output
		}
	}
	return nil
}

// applyKeras sets what the file's training config asks for on cfg: its
// losses (with their weights), and its optimizer, learning rate and
// global clipping unless --optimizer (or --lr, for the rate) was given.
func (o *options) applyKeras(cfg *train.Config) error {
	km, err := o.loadKeras()
	if err != nil {
		return err
	}
	losses, err := km.Training.StepLosses()
	if err != nil && o.planOnly && errors.Is(err, keras.ErrUnsupported) {
		// a plan of the architecture: the loss changes a few small buffers
		o.kf.planNote, losses, err = fmt.Sprintf("%v: planned with the default loss\n", err), nil, nil
	}
	if err != nil {
		return fmt.Errorf("%s: %w", o.keras, err)
	}
	switch {
	case len(losses) == 1 && losses[0].Output == 0 && losses[0].Weight == 1:
		cfg.Loss = losses[0].Loss
	case len(losses) > 0:
		cfg.Losses = losses
	}
	if o.set["optimizer"] {
		return nil
	}
	opt, err := km.Training.NewOptimizer()
	if err != nil && o.planOnly && errors.Is(err, keras.ErrUnsupported) {
		o.kf.planNote += fmt.Sprintf("%v: planned with --optimizer %s\n", err, o.optimizer)
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: %w (pass --optimizer to use another)", o.keras, err)
	}
	if opt == nil {
		return nil
	}
	cfg.Optimizer = opt.Optimizer
	if !o.set["lr"] {
		cfg.Schedule = opt.Schedule
	}
	if opt.ClipNorm > 0 {
		cfg.ClipNorm = opt.ClipNorm
	}
	o.kf.optimizer = opt.Description
	return nil
}

// printKerasOptimizer says which optimizer of the file the run uses.
func (o *options) printKerasOptimizer(w io.Writer) {
	if o.kf != nil && o.kf.optimizer != "" {
		fmt.Fprintf(w, "optimizer from %s: %s\n", o.keras, o.kf.optimizer)
	}
	if o.kf != nil && o.kf.planNote != "" {
		fmt.Fprint(w, o.kf.planNote)
	}
}

// printKeras prints a Keras file's layers as model.summary() does (not
// with --json, whose object carries them).
func (o *options) printKeras(w io.Writer, asJSON bool) error {
	km, err := o.loadKeras()
	if err != nil || asJSON {
		return err
	}
	fmt.Fprintf(w, "Keras model %q from %s\n", km.Name, o.keras)
	io.WriteString(w, km.Summary())
	o.printKerasOptimizer(w)
	return nil
}

// kerasLayer is one row of a Keras model's summary in plan --json.
type kerasLayer struct {
	Name            string `json:"name"`
	Class           string `json:"class"`
	OutputShape     string `json:"output_shape"`
	Params          int    `json:"params"`
	TrainableParams int    `json:"trainable_params"`
}

// addKeras adds the Keras model's counts and summary rows to a plan report.
func (o *options) addKeras(r *planReport) error {
	km, err := o.loadKeras()
	if err != nil {
		return err
	}
	total, trainable, nonTrainable := km.Params, km.TrainableParams, km.NonTrainableParams()
	r.TotalParams, r.TrainableParams, r.NonTrainableParams = &total, &trainable, &nonTrainable
	if o.kf.optimizer != "" {
		r.Optimizer = o.kf.optimizer
	}
	for _, l := range km.Layers {
		r.KerasLayers = append(r.KerasLayers, kerasLayer{Name: l.Name, Class: l.Class,
			OutputShape: keras.OutputShapeString(l), Params: l.Params, TrainableParams: l.TrainableParams})
	}
	return nil
}

// kerasStart says which optimizer of the file a training run uses and, with
// --keras-weights, loads the file's TensorFlow.js weights into the
// trainer's variables before the first step.
func (o *options) kerasStart(w io.Writer, t *train.Trainer) error {
	if o.keras == "" {
		return nil
	}
	o.printKerasOptimizer(w)
	if f := o.kf.m.File; f != nil && f.HasWeights() {
		if o.set["keras-weights"] && !o.kerasWeights {
			fmt.Fprintf(w, "weights: fresh (--keras-weights=false), not %s's\n", o.keras)
			return nil
		}
		return startFromFile(w, o.kf.m, t, o.kf.optimizer != "")
	}
	if !o.kerasWeights {
		return nil
	}
	if err := keras.LoadWeights(o.keras, o.kf.m, t.SetWeight); err != nil {
		return err
	}
	fmt.Fprintf(w, "weights from %s's weightsManifest\n", o.keras)
	return nil
}
