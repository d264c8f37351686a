package datasets

import (
	"strings"
	"testing"
)

// TestFashionMNIST reads Debian's dataset-fashion-mnist files (the test
// script installs the package).
func TestFashionMNIST(t *testing.T) {
	tr, te, err := FashionMNIST("")
	if err != nil {
		t.Fatal(err)
	}
	if tr.N != 60000 || te.N != 10000 {
		t.Fatalf("%d train and %d test images, want 60000 and 10000", tr.N, te.N)
	}
	for _, e := range []*struct {
		name   string
		labels []int32
		want   int
	}{{"train", tr.Labels, 6000}, {"test", te.Labels, 1000}} {
		var counts [10]int
		for _, l := range e.labels {
			counts[l]++
		}
		for c, n := range counts {
			if n != e.want {
				t.Errorf("%s: class %d has %d images, want %d (Fashion-MNIST is balanced)", e.name, c, n, e.want)
			}
		}
	}
	if err := tr.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestFashionMNISTMissing(t *testing.T) {
	_, _, err := FashionMNIST(t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "dataset-fashion-mnist") || !strings.Contains(err.Error(), "train-images-idx3-ubyte.gz") {
		t.Fatalf("got %v, want an error naming the file and the Debian package", err)
	}
}
