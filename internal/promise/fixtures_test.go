package promise

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"image"
	"image/png"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// The user's data sets a test trains on, written into the test's own
// temporary directory. Each is learnable (the classes differ in their
// mean) and small, so that a run of a few steps takes well under a second
// beside its start-up.

// imageFolder writes a folder of PNG images in two class sub-folders
// (Keras' image_dataset_from_directory layout), perClass images of
// size x size RGB pixels in each, and returns the folder.
func imageFolder(t *testing.T, size, perClass int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "imgs")
	rng := rand.New(rand.NewPCG(uint64(size), uint64(perClass)))
	for k, class := range []string{"cats", "dogs"} {
		if err := os.MkdirAll(filepath.Join(dir, class), 0o755); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < perClass; i++ {
			m := image.NewRGBA(image.Rect(0, 0, size, size))
			for p := 0; p < len(m.Pix); p += 4 {
				v := 60 + 120*k + rng.IntN(70) - 35
				m.Pix[p], m.Pix[p+1], m.Pix[p+2], m.Pix[p+3] = uint8(v), uint8(255-v), uint8(rng.IntN(256)), 255
			}
			var b bytes.Buffer
			if err := png.Encode(&b, m); err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(dir, class, fmt.Sprintf("%03d.png", i)), b.Bytes())
		}
	}
	return dir
}

// csvFile writes a CSV with a header and n rows of 8 features around a
// class's mean and a "label" column of class names (setosa, versicolor,
// virginica) in the middle.
func csvFile(t *testing.T, n int) string {
	t.Helper()
	rng := rand.New(rand.NewPCG(3, uint64(n)))
	names := []string{"setosa", "versicolor", "virginica"}
	var b bytes.Buffer
	b.WriteString("f0,f1,f2,f3,label,f4,f5,f6,f7\n")
	for i := 0; i < n; i++ {
		k := rng.IntN(len(names))
		var f [8]string
		for j := range f {
			f[j] = fmt.Sprintf("%.4f", float64(k)*float64(j%3-1)+rng.NormFloat64()*0.4)
		}
		fmt.Fprintf(&b, "%s,%s,%s\n", strings.Join(f[:4], ","), names[k], strings.Join(f[4:], ","))
	}
	path := filepath.Join(t.TempDir(), "iris.csv")
	writeFile(t, path, b.Bytes())
	return path
}

// npyFiles writes n 8x8 one-channel images as x.npy ('<f4', shape
// (n, 8, 8, 1)) and their classes (4 of them) as y.npy ('<i8', shape (n,)),
// in the NPY 1.0 format, and returns the two paths.
func npyFiles(t *testing.T, n int) (x, y string) {
	t.Helper()
	rng := rand.New(rand.NewPCG(5, uint64(n)))
	var xs, ys []byte
	for i := 0; i < n; i++ {
		k := rng.IntN(4)
		for j := 0; j < 64; j++ {
			v := float32(rng.NormFloat64()*0.3) + 0.5*float32(k)*float32(j%4-1)
			xs = binary.LittleEndian.AppendUint32(xs, math.Float32bits(v))
		}
		ys = binary.LittleEndian.AppendUint64(ys, uint64(k))
	}
	dir := t.TempDir()
	x, y = filepath.Join(dir, "x.npy"), filepath.Join(dir, "y.npy")
	writeFile(t, x, npy("<f4", []int{n, 8, 8, 1}, xs))
	writeFile(t, y, npy("<i8", []int{n}, ys))
	return x, y
}

// npy encodes an array in the NPY 1.0 format: the magic, the version, a
// little-endian uint16 header length, a Python dict literal padded with
// spaces and ended by a newline so the data start at a multiple of 64.
func npy(descr string, shape []int, data []byte) []byte {
	dims := ""
	for _, d := range shape {
		dims += fmt.Sprintf("%d, ", d)
	}
	h := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr, dims)
	for (10+len(h)+1)%64 != 0 {
		h += " "
	}
	h += "\n"
	b := append([]byte("\x93NUMPY\x01\x00"), byte(len(h)), byte(len(h)>>8))
	return append(append(b, h...), data...)
}

var goroot = sync.OnceValues(func() (string, error) {
	b, err := exec.Command("go", "env", "GOROOT").Output()
	return strings.TrimSpace(string(b)), err
})

// textFile writes the Go sources (tests left out) of the packages go/ast
// and go/parser of the Go toolchain, concatenated: about 200 KB of text
// for --text.
func textFile(t *testing.T) string {
	t.Helper()
	root, err := goroot()
	if err != nil {
		t.Fatalf("go env GOROOT: %v", err)
	}
	var b bytes.Buffer
	for _, pkg := range []string{"ast", "parser"} {
		files, err := filepath.Glob(filepath.Join(root, "src", "go", pkg, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no Go sources in %s/src/go/%s (%v)", root, pkg, err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			b.Write(src)
		}
	}
	path := filepath.Join(t.TempDir(), "corpus.txt")
	writeFile(t, path, b.Bytes())
	return path
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// kerasConfig is the functional Keras config the Keras kind trains: a
// residual convolutional network for the 8x8 digits.
func kerasConfig(t *testing.T) string {
	t.Helper()
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	path := filepath.Join(filepath.Dir(strings.TrimSpace(string(gomod))), "nn", "keras", "testdata", "digits_residual_k2.json")
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// fashionMNIST fails the test unless Debian's dataset-fashion-mnist is
// installed: the streamed runs need it, and the test command installs it.
func fashionMNIST(t *testing.T) {
	t.Helper()
	const dir = "/usr/share/datasets/fashion-mnist"
	if _, err := os.Stat(filepath.Join(dir, "train-images-idx3-ubyte.gz")); err != nil {
		t.Fatalf("Fashion-MNIST is not installed (%v): apt-get install dataset-fashion-mnist", err)
	}
}
