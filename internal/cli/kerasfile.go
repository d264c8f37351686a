package cli

import (
	"fmt"
	"io"

	"github.com/headroom-ml/headroom/nn/keras"
	"github.com/headroom-ml/headroom/train"
)

// loadKerasFile reads --keras (any Keras file, told apart by content)
// with --keras-config for a weights-only file.
func loadKerasFile(path, config string) (*keras.Model, error) {
	if config != "" {
		return keras.LoadWithConfig(path, config)
	}
	return keras.Load(path)
}

// startFromFile loads the weights a .keras or .h5 file holds into the
// trainer's variables before the first step: training fine-tunes them.
func startFromFile(w io.Writer, m *keras.Model, t *train.Trainer) error {
	if err := keras.LoadFileWeights(m, t.SetWeight); err != nil {
		return err
	}
	f := m.File
	fmt.Fprintf(w, "weights from %s (%s, Keras %s)\n", f.Path, f.Format, orUnknown(f.KerasVersion))
	return nil
}

func orUnknown(s string) string {
	if s == "" {
		return "version unknown"
	}
	return s
}
