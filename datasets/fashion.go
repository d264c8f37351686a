package datasets

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/headroom-ml/headroom/data"
	"github.com/headroom-ml/headroom/tensor"
)

// FashionMNISTDir is where Debian's dataset-fashion-mnist installs the files.
const FashionMNISTDir = "/usr/share/datasets/fashion-mnist"

// FashionMNIST reads the training (60,000) and test (10,000) images and
// labels from dir's gzipped IDX files (train-images-idx3-ubyte.gz, ...), as
// 28x28x1 images.
func FashionMNIST(dir string) (trainSet, testSet *data.Examples, err error) {
	if dir == "" {
		dir = FashionMNISTDir
	}
	if trainSet, err = readIDXPair(dir, "train", "fashion-mnist/train"); err != nil {
		return nil, nil, err
	}
	if testSet, err = readIDXPair(dir, "t10k", "fashion-mnist/test"); err != nil {
		return nil, nil, err
	}
	return trainSet, testSet, nil
}

// FashionMNISTTest reads only the 10,000 test images (the test set of a run
// whose training set is streamed).
func FashionMNISTTest(dir string) (*data.Examples, error) {
	if dir == "" {
		dir = FashionMNISTDir
	}
	return readIDXPair(dir, "t10k", "fashion-mnist/test")
}

// fashionInstalled returns an error naming the first Fashion-MNIST file
// missing from dir, and how to install them.
func fashionInstalled(dir string) error {
	for _, prefix := range []string{"train", "t10k"} {
		for _, kind := range []string{"images-idx3", "labels-idx1"} {
			p := filepath.Join(dir, prefix+"-"+kind+"-ubyte.gz")
			if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("datasets: Fashion-MNIST file %s not found: install Debian's package dataset-fashion-mnist (apt-get install dataset-fashion-mnist) or give --data-dir", p)
			}
		}
	}
	return nil
}

func readIDXPair(dir, prefix, name string) (*data.Examples, error) {
	images := filepath.Join(dir, prefix+"-images-idx3-ubyte.gz")
	labels := filepath.Join(dir, prefix+"-labels-idx1-ubyte.gz")
	if err := fashionInstalled(dir); err != nil {
		return nil, err
	}
	e := &data.Examples{Name: name, Shape: tensor.Shape{28, 28, 1}, Scale: 1.0 / 255, Classes: 10}
	// one buffer of the header's size (appending would hold twice the set
	// while it grows)
	shape, err := data.IDXShape(images)
	if err != nil {
		return nil, fmt.Errorf("datasets: %w", err)
	}
	if n := shape[0]; len(shape) == 3 && n > 0 && n <= 1<<24 {
		e.Pixels, e.Labels = make([]uint8, 0, n*28*28), make([]int32, 0, n)
	}
	for s, err := range data.IDX(images, labels).All(context.Background(), data.Config{Name: "load:" + name}) {
		if err != nil {
			return nil, fmt.Errorf("datasets: %w", err)
		}
		if s.X.DType() != tensor.Uint8 || s.X.Len() != 28*28 || s.Y.Len() != 1 {
			return nil, fmt.Errorf("datasets: %s holds %v images with %v labels, want uint8 28x28 images and one label each", images, s.X, s.Y)
		}
		e.Pixels = append(e.Pixels, s.X.Uint8s()...)
		label := int32(s.Y.Float64At(0))
		if label < 0 || label > 9 {
			return nil, fmt.Errorf("datasets: %s: label %d of example %d is outside 0..9", labels, label, e.N)
		}
		e.Labels = append(e.Labels, label)
		e.N++
	}
	return e, nil
}
