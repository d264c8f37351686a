package hdf5

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// readAll reads every dataset and attribute of a file, as the Keras reader
// does.
func readAll(data []byte) error {
	f, err := Parse(data, "fuzz.h5")
	if err != nil {
		return err
	}
	root, err := f.Root()
	if err != nil {
		return err
	}
	if as, err := root.Attrs(); err == nil {
		for _, a := range as {
			a.Value()
		}
	}
	return root.Walk(func(d *Dataset) error {
		if as, err := d.Attrs(); err == nil {
			for _, a := range as {
				a.Value()
			}
		}
		_, err := d.Float32s()
		if errors.Is(err, ErrUnsupported) {
			return nil
		}
		return err
	})
}

// FuzzOpen: no input makes the reader panic, hang or allocate without
// bound; every failure is a *FormatError or a NotFoundError. Its seeds in
// testdata/fuzz/FuzzOpen are small files h5py wrote: a group large enough
// for a B-tree of symbol nodes, dense links and attributes in fractal
// heaps with a fixed-array chunk index, and chunked deflated data.
func FuzzOpen(f *testing.F) {
	b, _ := sample(&testing.T{})
	f.Add(b)
	if files, _ := filepath.Glob(filepath.Join("testdata", "*.h5")); len(files) > 0 {
		for _, p := range files {
			if d, err := os.ReadFile(p); err == nil {
				f.Add(d)
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		err := readAll(data)
		var fe *FormatError
		var nf *NotFoundError
		if err != nil && !errors.As(err, &fe) && !errors.As(err, &nf) {
			t.Fatalf("an error that is not a *FormatError: %T %v", err, err)
		}
	})
}
