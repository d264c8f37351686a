package cli

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/headroom-ml/headroom/data"
	"github.com/headroom-ml/headroom/datasets"
	"github.com/headroom-ml/headroom/tensor"
	"github.com/headroom-ml/headroom/train"
)

// vocab is the vocabulary of byte-level text.
const vocab = 256

// runData returns the data a run trains on, as the flags name it: text,
// the user's files (--data), or a built-in data set. Nothing is read yet:
// train decides, under the budget, whether to load or stream it.
func (o *options) runData(df *dataFlags) (*train.Data, error) {
	mode := train.StreamAuto
	if o.stream {
		mode = train.StreamAlways
	}
	switch {
	case o.isText():
		t, err := o.textData()
		if err != nil {
			return nil, err
		}
		return train.OnText(t), nil
	case df != nil && df.given():
		files, err := df.userFiles(o.seed)
		if err != nil {
			return nil, err
		}
		return train.FromSet(files, mode), nil
	}
	set, err := o.builtinSet()
	if err != nil {
		return nil, err
	}
	return train.FromSet(set, mode), nil
}

// builtinSet returns the built-in data set --dataset names.
func (o *options) builtinSet() (data.Set, error) {
	switch o.dataset {
	case "digits":
		return datasets.DigitsSet(), nil
	case "fashion-mnist", "fashion":
		return datasets.FashionMNISTSet(o.dataDir), nil
	case "synthetic":
		// the peers' sizes: 60,000 examples for the mlp, 20,000 for the cnn
		n, shape := 60000, tensor.Shape{784}
		if o.model == "cnn" || o.model == "resnet" {
			n, shape = 20000, tensor.Shape{28, 28, 1}
		}
		return datasets.SyntheticSet(shape, n, n/10, 10, 0), nil
	case "shapes":
		return datasets.ShapesSet(shapesTrain, shapesTest, shapesSize, 0), nil
	}
	return nil, usagef("unknown data set %q (known: digits, fashion-mnist, synthetic, shapes, go-src)", o.dataset)
}

// textData is the text a language model trains on: go-src (the Go
// toolchain's own sources), or the file or folder --text, split 90% /
// 10% as go-src is; listed, read once the plan fits.
func (o *options) textData() (*train.Text, error) {
	t := &train.Text{T: o.seq, ValWindows: datasets.GoSrcValWindows, Buckets: o.buckets}
	var err error
	if o.text != "" {
		t.Name = "text:" + o.text
		t.Set, err = data.NewTextSet(t.Name, o.text, data.TextOptions{Separator: true})
	} else {
		t.Name = "go-src"
		t.Set, err = datasets.GoSrcSet()
	}
	return t, err
}

// dataName names the run's data set in reports.
func (o *options) dataName(df *dataFlags) string {
	switch {
	case o.text != "":
		return "text"
	case df != nil && df.given():
		return filepath.Base(df.path)
	}
	return o.dataset
}

// describe returns what the run's training examples are (train decides
// first whether they are loaded or streamed under the plan's budget),
// saying which flag to change for text given as --data.
func (o *options) describe(d *train.Data, df *dataFlags) (data.SetInfo, error) {
	budget, _ := o.planBudget()
	info, err := d.Describe(budget)
	if errors.Is(err, data.ErrTextFormat) {
		return info, fmt.Errorf("--data %s is text: byte-level text trains the sequence models: --text %s --model gpt (or lstm)", df.path, df.path)
	}
	return info, err
}

// fashionClasses are Fashion-MNIST's class names (its labels 0 to 9), as
// Keras' documentation lists them.
var fashionClasses = []string{"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"}

// preprocessing describes how the run's data is read, for the model file:
// the user's files' own (class names, columns, image size, scaling), or a
// built-in set's or a text's.
func (o *options) preprocessing(info data.SetInfo, df *dataFlags) data.Preprocessing {
	switch {
	case o.isText():
		return data.Preprocessing{Format: "text", Data: o.dataName(df)}
	case df != nil && df.given():
		pre := df.src.Preprocessing
		if abs, err := filepath.Abs(df.path); err == nil {
			pre.Data = abs
		}
		return pre
	}
	e := info.Train
	pre := data.Preprocessing{Format: o.dataset, Classes: e.Classes, Shape: e.Shape.Clone(), Data: o.dataset}
	if e.Scale != 0 && e.Scale != 1 {
		pre.Scale = float64(e.Scale)
	}
	if o.dataset == "fashion-mnist" || o.dataset == "fashion" {
		pre.ClassNames = fashionClasses
	}
	return pre
}

// registered names the nn.NewModel call that built the run's model, kept
// in the model file for a model whose architecture cannot be written.
func (o *options) registered(info data.SetInfo) *train.Registered {
	switch {
	case o.keras != "":
		return nil
	case o.isText():
		return &train.Registered{Name: o.model, Input: tensor.Shape{o.seq}, Classes: vocab}
	}
	return &train.Registered{Name: o.model, Input: info.Train.Shape.Clone(), Classes: info.Train.Classes}
}
