package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/headroom-ml/headroom/data"
	"github.com/headroom-ml/headroom/datasets"
	"github.com/headroom-ml/headroom/tensor"
	"github.com/headroom-ml/headroom/train"
)

// calibrationSamples returns up to n examples as the model's input (float
// values, scaled), a seeded sample of --calibration-data or of the
// training data, and what they are.
func calibrationSamples(mf *train.ModelFile, path, labels string, n int) ([][]float32, string, error) {
	pre := mf.Preprocessing
	scale := pre.ScaleOrDefault()
	src := &data.Source{Path: path, Labels: labels, Unlabeled: true, Preprocessing: pre}
	src.Format, src.Shape = "", nil
	if pre.Format == "text" { // a language model: its training text's path is not kept
		switch ext := strings.ToLower(filepath.Ext(path)); {
		case path == "":
			return nil, "", errors.New("--int8 on a language model needs --calibration-data: text (a file or folder, cut into windows of the model's length) or an .npy of int32 token windows [N, T]")
		case ext != ".npy" && ext != ".npz":
			return textWindows(path, mf.Model.Inputs()[0].Shape.Size(), n)
		}
	}
	switch {
	case path != "":
	case pre.Data == "digits" || pre.Data == "fashion-mnist" || pre.Data == "fashion":
		var e *data.Examples
		var err error
		if pre.Data == "digits" {
			e, _, err = datasets.Digits()
		} else {
			e, _, err = datasets.FashionMNIST("")
		}
		if err != nil {
			return nil, "", err
		}
		return examplesSample(e, n), pre.Data, nil
	case pre.Data != "":
		if _, err := os.Stat(pre.Data); err != nil {
			return nil, "", fmt.Errorf("--int8 needs --calibration-data: the training data %s is not there any more", pre.Data)
		}
		src.Path, src.Format = pre.Data, pre.Format
	default:
		return nil, "", errors.New("--int8 needs --calibration-data (the model file does not say where its training data is)")
	}
	out, err := sampleRows(src, n, scale)
	return out, src.Path, err
}

// sampleRows returns a seeded sample of n examples of src as float rows
// (uint8 values scaled by scale): a shuffle buffer over the data's order
// (image folders list one class after the other).
func sampleRows(src *data.Source, n int, scale float64) ([][]float32, error) {
	ds, err := src.Open()
	if err != nil {
		return nil, err
	}
	var out [][]float32
	sample := ds.Shuffle(max(4*n, 4096), 42).Take(n)
	for s, err := range sample.All(context.Background(), data.Config{Name: "calibration"}) {
		if err != nil {
			return nil, err
		}
		row := make([]float32, s.X.Len())
		for k := range row {
			v := s.X.Float64At(k)
			if s.X.DType() == tensor.Uint8 {
				v *= scale
			}
			row[k] = float32(v)
		}
		out = append(out, row)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("the calibration data %s holds no examples", src.Path)
	}
	return out, nil
}

// textWindows returns up to n windows of T bytes of the text at path (a
// file or folder, read as training reads it), evenly spread, as token ids:
// a language model's calibration examples.
func textWindows(path string, T, n int) ([][]float32, string, error) {
	text, err := data.ReadText(path, data.TextOptions{Separator: true})
	if err != nil {
		return nil, "", err
	}
	if len(text) < T {
		return nil, "", fmt.Errorf("the calibration text %s has %d bytes, less than a window of %d", path, len(text), T)
	}
	count := min(n, len(text)-T+1)
	out := make([][]float32, count)
	for i := range out {
		off := 0
		if count > 1 {
			off = i * (len(text) - T) / (count - 1)
		}
		out[i] = make([]float32, T)
		for k := range out[i] {
			out[i][k] = float32(text[off+k])
		}
	}
	return out, path, nil
}

// examplesSample returns up to n examples of e, evenly spread.
func examplesSample(e *data.Examples, n int) [][]float32 {
	d := e.Shape.Size()
	step := max(1, e.N/n)
	var out [][]float32
	for i := 0; i < e.N && len(out) < n; i += step {
		row := make([]float32, d)
		for k := range row {
			if e.Floats != nil {
				row[k] = e.Floats[i*d+k]
			} else {
				row[k] = float32(e.Pixels[i*d+k]) * e.Scale
			}
		}
		out = append(out, row)
	}
	return out
}
