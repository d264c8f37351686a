package cli

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/headroom-ml/headroom/internal/hdf5"
	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/nn/keras"
	"github.com/headroom-ml/headroom/train"
)

// loadKerasFile reads --keras (any Keras file, told apart by content)
// with --keras-config for a weights-only file.
func loadKerasFile(path, config string, opts ...keras.Option) (*keras.Model, error) {
	if config != "" {
		return keras.LoadWithConfig(path, config, opts...)
	}
	return keras.Load(path, opts...)
}

// startFromFile loads the weights a .keras or .h5 file holds into the
// trainer's variables before the first step: training fine-tunes them.
// With fileOptimizer (the run trains with the file's optimizer), the
// optimizer state the file keeps is loaded too, so Adam's moments and its
// bias correction continue where Keras stopped; where the file's state
// does not map, the optimizer starts afresh, as Keras' own loading does,
// and the run says why.
func startFromFile(w io.Writer, m *keras.Model, t *train.Trainer, fileOptimizer bool) error {
	if err := keras.LoadFileWeights(m, t.SetWeight); err != nil {
		return err
	}
	f := m.File
	fmt.Fprintf(w, "weights from %s (%s, Keras %s)\n", f.Path, f.Format, orUnknown(f.KerasVersion))
	st, why, err := keras.ReadOptimizerState(m)
	switch {
	case err != nil:
		return err
	case st == nil && why != "":
		fmt.Fprintf(w, "optimizer state: fresh (%s)\n", why)
	case st == nil:
	case !fileOptimizer:
		fmt.Fprintf(w, "optimizer state: fresh (--optimizer replaces the file's %s)\n", st.Class)
	default:
		if err := t.ContinueOptimizer(st.Slots, st.Iterations); err != nil {
			fmt.Fprintf(w, "optimizer state: fresh (%v)\n", err)
			return nil
		}
		fmt.Fprintf(w, "optimizer state from %s: %s after %d steps\n", f.Path, st.Class, st.Iterations)
	}
	return nil
}

func orUnknown(s string) string {
	if s == "" {
		return "version unknown"
	}
	return s
}

// loadModelFile reads --load: a headroom model file (safetensors), or a
// Keras file holding weights (.keras, a legacy .h5, a weights-only .h5
// with --keras-config), told apart by their first bytes.
func loadModelFile(path, kerasConfig string) (*train.ModelFile, error) {
	head := make([]byte, 8)
	if f, err := os.Open(path); err == nil {
		io.ReadFull(f, head)
		f.Close()
	}
	if !hdf5.IsHDF5(head) && !bytes.HasPrefix(head, []byte("PK\x03\x04")) {
		if kerasConfig != "" {
			return nil, usagef("--keras-config goes with a Keras weights file; %s is not one", path)
		}
		return train.LoadModel(path)
	}
	km, err := loadKerasFile(path, kerasConfig)
	if err != nil {
		return nil, err
	}
	if km.File == nil || !km.File.HasWeights() {
		return nil, fmt.Errorf("%s holds no weights: a model to run needs them", path)
	}
	ws, err := keras.ReadFileWeights(km)
	if err != nil {
		return nil, err
	}
	mf := &train.ModelFile{Path: path, Model: km.NN(), Weights: ws, Meta: map[string]string{}}
	losses, err := km.Training.StepLosses()
	if err == nil && len(losses) == 1 && losses[0].Output == 0 {
		mf.Loss = losses[0].Loss
	}
	if out := outputShape(km, 0); out.Size() > 1 {
		mf.Preprocessing.Classes = out.Size()
	}
	return mf, nil
}

// isKerasArchive reports whether --save names a .keras file.
func isKerasArchive(path string) bool { return strings.EqualFold(filepath.Ext(path), ".keras") }

// saveKeras writes the trained model as a Keras 3 .keras archive: the
// --keras file's own config when it is Keras 3's, else one written from
// the model.
func (o *options) saveKeras(w io.Writer, path string, m nn.Model, t *train.Trainer) error {
	var from *keras.Model
	if o.kf != nil {
		from = o.kf.m
	}
	if err := keras.WriteArchive(path, m, from, t.Weight); err != nil {
		return err
	}
	fmt.Fprintf(w, "headroom: saved the model to %s (a Keras 3 archive: keras.saving.load_model, or headroom predict --load %s)\n", path, path)
	return nil
}

// checkKerasSave refuses, before step 1, a --save .keras of a model that
// has no Keras config (a run never trains to lose its result).
func (o *options) checkKerasSave(m nn.Model) error {
	var from *keras.Model
	if o.kf != nil {
		from = o.kf.m
	}
	if err := keras.CheckArchive(m, from); err != nil {
		return fmt.Errorf("--save: %w", err)
	}
	return nil
}
