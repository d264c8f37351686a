package data

import (
	"errors"
	"fmt"
	"path/filepath"
)

// UserFiles is a data set in the user's files (Source) as a Set: loaded
// whole, or streamed from the files every epoch. A Split fraction of it is
// held out for validation: loaded, the last Split of the examples after a
// shuffle by Seed (Keras' validation_split); streamed, the examples a
// seeded hash of their content puts below Split. Validation names held-out
// files of their own instead (loaded only). What the files hold is known
// only by reading them, so Describe reports nothing and Bytes bounds it
// from the files' sizes.
type UserFiles struct {
	Source     *Source
	Split      float64
	Validation *Source
	Seed       uint64
}

// check refuses options that do not go together.
func (f *UserFiles) check() error {
	if f.Split != 0 && f.Validation != nil {
		return errors.New("data: give a validation split or validation files, not both")
	}
	if f.Split < 0 || f.Split >= 1 {
		return fmt.Errorf("data: validation split %v: want a fraction in [0, 1)", f.Split)
	}
	return nil
}

func (f *UserFiles) heldOutName() string {
	if f.Split > 0 || f.Validation != nil {
		return "validation"
	}
	return ""
}

// Describe reports that the files must be read to be described.
func (f *UserFiles) Describe() (SetInfo, bool) { return SetInfo{}, false }

// Bytes returns about how many bytes the examples take in memory: the
// files' sizes (decoded sizes for images), validation files included.
func (f *UserFiles) Bytes() (int64, error) {
	n, err := f.Source.EstimateBytes()
	if err != nil || f.Validation == nil {
		return n, err
	}
	v, err := f.Validation.EstimateBytes()
	return n + v, err
}

// Load reads the files into memory and splits off the validation part.
func (f *UserFiles) Load() (trainSet, heldOut *Examples, err error) {
	if err := f.check(); err != nil {
		return nil, nil, err
	}
	all, err := f.Source.Load(filepath.Base(f.Source.Path))
	if err != nil {
		return nil, nil, err
	}
	switch {
	case f.Split > 0:
		return SplitValidation(all, f.Split, f.Seed)
	case f.Validation != nil:
		v := f.Validation
		v.Preprocessing = f.Source.Preprocessing
		v.Shape = nil
		val, err := v.Load(filepath.Base(v.Path))
		if err != nil {
			return nil, nil, err
		}
		if !val.Shape.Equal(all.Shape) {
			return nil, nil, fmt.Errorf("data: validation data %s has examples of shape %v, the training data %v", v.Path, val.Shape, all.Shape)
		}
		if v.Classes > f.Source.Classes {
			return nil, nil, fmt.Errorf("data: validation data %s has labels up to %d, the training data only up to %d", v.Path, v.Classes-1, f.Source.Classes-1)
		}
		val.Classes = all.Classes
		return all, val, nil
	}
	return all, nil, nil
}

// Stream scans the files once (counting the examples, checking their
// shapes, finding the classes and collecting the held-out ones) and
// returns their batches.
func (f *UserFiles) Stream() (*Streamed, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	if f.Validation != nil {
		return nil, errors.New("data: a streamed data set holds out a validation split of itself; validation files are for data loaded in memory")
	}
	st := &Stream{Source: f.Source, Split: f.Split, Seed: f.Seed}
	if err := st.Scan(); err != nil {
		return nil, err
	}
	e := &Examples{Name: filepath.Base(f.Source.Path), Shape: st.Shape.Clone(), N: st.N, Classes: f.Source.Classes, Scale: 1}
	kind := LabelKind{Class: true, Classes: f.Source.Classes}
	if st.targets > 0 {
		kind = LabelKind{TargetSize: st.targets}
	}
	info := SetInfo{Train: e, Labels: kind, HeldOutName: f.heldOutName()}
	if st.Val != nil { // collected by the scan: a fraction of the data
		info.HeldOut, info.HeldOutBytes = st.Val.N, st.Val.Bytes()
	}
	d := st.Shape.Size()
	return &Streamed{Info: info, HeldOut: func() (*Examples, error) { return st.Val, nil }, From: f.Source.Path,
		Batches: func(batch int, budget int64, seed uint64) (Dataset[Batch], int) {
			shuffle := StreamShuffle(batch, d, budget)
			return st.Dataset(batch, shuffle), shuffle
		}}, nil
}
